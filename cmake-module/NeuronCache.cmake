# neuron_cache_prefetch(): make the compiled Neuron models a manifest declares available to a
# CMake build, through the neuron-cache tool (no cache logic lives here).
#
#   neuron_cache_prefetch(MANIFEST <file> [CONFIGS <names...>] [CACHE_REPO <repo>]
#                         [CACHE_DIR <dir>] [COMPILE_MISSING] [PUSH] [READ_ONLY] [OFFLINE]
#                         [STRICT] [LOCKED] [LOCKFILE <file>] [TRUSTED_KEYS <keys...>]
#                         [REQUIRE_SIGNATURES] [OUTPUT_VARIABLE <var>])
#
# At configure time it runs `neuron-cache prefetch --export-dir` and gives each configuration
# complete locally a folder ${CMAKE_BINARY_DIR}/neuron-cache/<manifest stem>/<name> (symlinks to
# its NEFFs; usable as NEURON_COMPILE_CACHE_URL). For each configuration with a folder:
#   NeuronCache::<name>                INTERFACE target: property NEURON_CACHE_ARTIFACTS_DIR and
#                                      the compile definition NEURON_CACHE_ARTIFACTS_<NAME>="<folder>"
#   NEURON_CACHE_ARTIFACTS_<NAME>      the folder, as a variable (NAME upper-cased, other chars -> _)
#   <var> / <var>_MISSING / <var>_REPORT  with OUTPUT_VARIABLE: configurations with artifacts,
#                                      those without, the tool's JSON report
# A configuration without a folder (not found, the store down) still gets NeuronCache::<name>,
# with the property NEURON_CACHE_MISSING: building what links it fails, naming it and what to do.
# One namespace, NeuronCache::, for the tool (NeuronCache::neuron-cache), the library
# (NeuronCache::neuron_cache, in-tree builds) and the configurations; the names "neuron-cache" and
# "neuron_cache" are therefore not configuration names here.
# Old names, kept as aliases of the same values (0.1 used them; new code should not):
#   neuron_cache::<name>      -> NeuronCache::<name>
#   NEURON_CACHE_<NAME>_DIR   -> NEURON_CACHE_ARTIFACTS_<NAME> (variable)
#   NEURON_CACHE_DIR_<NAME>   -> NEURON_CACHE_ARTIFACTS_<NAME> (compile definition)
#   NEURON_CACHE_DIR          -> NEURON_CACHE_ARTIFACTS_DIR (target property)
#   NEURON_CACHE_DIR          -> NEURON_CACHE_CACHE_DIR (cache variable; warns when used)
# COMPILE_MISSING compiles the missing ones at build time (custom target, part of ALL; their
# targets depend on it), PUSH then uploads them unless READ_ONLY.
# LOCKED (or LOCKFILE <file>; default: neuron-cache.lock beside the manifest, written by
# `neuron-cache lock`) installs exactly the locked files (`prefetch --locked`): no index or
# registry read, every file checked against the lock's sha256, a configuration the lock lacks or
# a changed manifest an error; editing the lockfile configures again. Not with COMPILE_MISSING or
# PUSH.
# TRUSTED_KEYS (public key lines, `neuron-cache key public`) replaces the manifest's trusted_keys;
# REQUIRE_SIGNATURES installs only entries one of them signed (the others are compiled with
# COMPILE_MISSING, else missing, their reason in the report). Signing happens where the cache is
# filled (`neuron-cache ci` with NEURON_CACHE_SIGNING_KEY); PUSH signs with that variable too.
#
# Defaults: CACHE_REPO, CACHE_DIR, STRICT, OFFLINE and READ_ONLY fall back to the cache variables
# NEURON_CACHE_REPO, NEURON_CACHE_CACHE_DIR, NEURON_CACHE_STRICT, NEURON_CACHE_OFFLINE and
# NEURON_CACHE_READ_ONLY, then to what the tool reads from the environment (CUSTOM_CACHE_REPO,
# NEURON_COMPILE_CACHE_URL, HF_HUB_OFFLINE). The Hub token is only ever HF_TOKEN in the
# environment of cmake and of the build: this file never reads it, so it cannot leak into the
# cache, a command line or a message.
#
# The tool: NEURON_CACHE_TOOL if set, else NeuronCache::neuron-cache from find_package, else the
# in-tree neuron-cache target (add_subdirectory/FetchContent), else neuron-cache on PATH. The
# in-tree target is not built yet at configure time, so then everything happens at build time:
# CONFIGS is required and the folders appear when the custom target neuron_cache_prefetch_<stem>
# (or neuron_cache_compile_<stem>) has run, before anything that links NeuronCache::<name>.
include_guard(GLOBAL)
# The tool's JSON report format this module reads (core/neuron_cache/report/report.schema.json).
set(_NEURON_CACHE_REPORT_FORMAT 2)
# Format 1 said "hub" where format 2 says "store" (a row cached in the store): both are read.
set(_NEURON_CACHE_REPORT_FORMATS 1 2)

if(CMAKE_VERSION VERSION_LESS 3.19)
  message(FATAL_ERROR "NeuronCache.cmake needs CMake 3.19 or newer (for string(JSON)); "
                      "this is CMake ${CMAKE_VERSION}")
endif()

set(NEURON_CACHE_TOOL "" CACHE FILEPATH
    "neuron-cache binary for neuron_cache_prefetch() (empty: NeuronCache::neuron-cache)")
set(NEURON_CACHE_REPO "" CACHE STRING
    "Default Hub cache repo of neuron_cache_prefetch() (empty: the manifest's, CUSTOM_CACHE_REPO)")
set(NEURON_CACHE_CACHE_DIR "" CACHE PATH
    "Default local cache of neuron_cache_prefetch() (empty: NEURON_COMPILE_CACHE_URL, the tool's)")
set(NEURON_CACHE_DIR "" CACHE PATH "Deprecated name of NEURON_CACHE_CACHE_DIR")
option(NEURON_CACHE_STRICT "neuron_cache_prefetch(): fail on cache problems" OFF)
option(NEURON_CACHE_OFFLINE "neuron_cache_prefetch(): never contact the cache store" OFF)
option(NEURON_CACHE_READ_ONLY "neuron_cache_prefetch(): never push to the cache store" OFF)

# Identifier form of a configuration name, for variable and macro names.
function(_neuron_cache_id out name)
  string(TOUPPER "${name}" id)
  string(REGEX REPLACE "[^A-Z0-9_]" "_" id "${id}")
  set(${out} "${id}" PARENT_SCOPE)
endfunction()

# Configuration names may hold "@" and ":", which target names may not.
function(_neuron_cache_target_name out name)
  string(REGEX REPLACE "[^A-Za-z0-9_.+-]" "_" safe "${name}")
  set(${out} "${safe}" PARENT_SCOPE)
endfunction()

# Refuses what neuron_cache_prefetch() was given wrong: its UNPARSED arguments, the KEYWORDS that
# lack a value (cmake_parse_arguments' lists) and whether MANIFEST was given.
function(_neuron_cache_check_arguments unparsed missing_values manifest_given)
  set(expected "MANIFEST, CONFIGS, CACHE_REPO, CACHE_DIR, COMPILE_MISSING, PUSH, READ_ONLY, "
               "OFFLINE, STRICT, LOCKED, LOCKFILE, TRUSTED_KEYS, REQUIRE_SIGNATURES, "
               "OUTPUT_VARIABLE")
  string(JOIN "" expected ${expected})
  if(NOT unparsed STREQUAL "")
    # The first one is the culprit: what follows is usually its value.
    list(GET unparsed 0 unknown)
    message(FATAL_ERROR "neuron_cache_prefetch: unknown argument ${unknown} (expected ${expected})")
  endif()
  foreach(keyword IN LISTS missing_values)
    if(keyword STREQUAL "CONFIGS")
      message(FATAL_ERROR "neuron_cache_prefetch: CONFIGS needs at least one configuration name "
                          "(leave CONFIGS out for all the manifest's configurations)")
    endif()
    message(FATAL_ERROR "neuron_cache_prefetch: ${keyword} needs a value "
                        "(is the variable you passed empty?)")
  endforeach()
  if(NOT manifest_given)
    message(FATAL_ERROR "neuron_cache_prefetch: MANIFEST <file> is required "
                        "(the neuron-cache.yaml that declares the configurations)")
  endif()
endfunction()

# Sets tool (a path usable now) or tool_target (an in-tree target, usable at build time only).
function(_neuron_cache_find_tool)
  set(tool "")
  set(tool_target "")
  if(NEURON_CACHE_TOOL)
    if(NOT EXISTS "${NEURON_CACHE_TOOL}" OR IS_DIRECTORY "${NEURON_CACHE_TOOL}")
      message(FATAL_ERROR "neuron_cache_prefetch: NEURON_CACHE_TOOL=${NEURON_CACHE_TOOL} is not "
                          "a file: point it at a neuron-cache binary, or empty it")
    endif()
    set(tool "${NEURON_CACHE_TOOL}")
  elseif(TARGET NeuronCache::neuron-cache)
    get_target_property(imported NeuronCache::neuron-cache IMPORTED)
    if(imported)
      get_target_property(tool NeuronCache::neuron-cache LOCATION)
    else()
      # This project's own alias: add_custom_command wants the real name in DEPENDS.
      get_target_property(tool_target NeuronCache::neuron-cache ALIASED_TARGET)
    endif()
  elseif(TARGET neuron-cache)
    set(tool_target neuron-cache)
  else()
    find_program(NEURON_CACHE_TOOL_ON_PATH neuron-cache)
    if(NOT NEURON_CACHE_TOOL_ON_PATH)
      message(FATAL_ERROR "neuron_cache_prefetch: no neuron-cache tool: call "
                          "find_package(NeuronCache CONFIG) first (with CMAKE_PREFIX_PATH set to "
                          "its install prefix), add_subdirectory() the neuron-cache project, or "
                          "set NEURON_CACHE_TOOL to a neuron-cache binary")
    endif()
    set(tool "${NEURON_CACHE_TOOL_ON_PATH}")
  endif()
  set(tool "${tool}" PARENT_SCOPE)
  set(tool_target "${tool_target}" PARENT_SCOPE)
endfunction()

# The CHECK_START text names the repo; only the tool knows the final answer, so this mirrors its
# order (argument, the manifest's cache_repo, CUSTOM_CACHE_REPO) for the message alone.
function(_neuron_cache_repo_label out manifest repo)
  if(repo STREQUAL "")
    file(STRINGS "${manifest}" line REGEX "^cache_repo:" LIMIT_COUNT 1)
    string(REGEX REPLACE "^cache_repo:[ \t]*([^ \t#]*).*" "\\1" repo "${line}")
    string(REGEX REPLACE "[\"']" "" repo "${repo}")
  endif()
  if(repo STREQUAL "" AND NOT "$ENV{CUSTOM_CACHE_REPO}" STREQUAL "")
    set(repo "$ENV{CUSTOM_CACHE_REPO}")
  endif()
  if(repo STREQUAL "")
    set(repo "the default cache repo")
  endif()
  set(${out} "${repo}" PARENT_SCOPE)
endfunction()

# Same units as the tool (format/bytes.h: powers of 1024 with IEC labels, one decimal).
function(_neuron_cache_size out bytes)
  set(unit B)
  set(scale 1)
  foreach(next_unit IN ITEMS KiB MiB GiB TiB)
    math(EXPR next "${scale} * 1024")
    if(bytes LESS next)
      break()
    endif()
    set(unit ${next_unit})
    set(scale ${next})
  endforeach()
  if(unit STREQUAL "B")
    set(${out} "${bytes} B" PARENT_SCOPE)
    return()
  endif()
  math(EXPR tenths "(${bytes} * 10 + ${scale} / 2) / ${scale}")
  math(EXPR whole "${tenths} / 10")
  math(EXPR decimal "${tenths} % 10")
  set(${out} "${whole}.${decimal} ${unit}" PARENT_SCOPE)
endfunction()

# "2 configurations", "1 configuration", or "the configurations" when CONFIGS is left out.
function(_neuron_cache_count_label out)
  list(LENGTH ARGN count)
  if(count EQUAL 0)
    set(${out} "the configurations" PARENT_SCOPE)
  elseif(count EQUAL 1)
    set(${out} "1 configuration" PARENT_SCOPE)
  else()
    set(${out} "${count} configurations" PARENT_SCOPE)
  endif()
endfunction()

# --config for each name: no name means all the manifest's configurations.
function(_neuron_cache_config_args out)
  set(args "")
  foreach(name IN LISTS ARGN)
    list(APPEND args --config "${name}")
  endforeach()
  set(${out} "${args}" PARENT_SCOPE)
endfunction()

# The tool's stderr without its progress lines, which the configure showed as they came: its
# warnings and errors (and their continuation lines). Progress lines are the tool's own lines
# that are neither a warning nor an error ("neuron-cache: fetching ...") and transfer lines
# ("Downloading: 1.0 MiB of ...", "Downloading done: ...").
function(_neuron_cache_without_progress out text)
  set(kept_warning "\nneuron-cache-kept-warning: ")
  set(kept_error "\nneuron-cache-kept-error: ")
  set(text "\n${text}")
  string(REPLACE "\nneuron-cache: warning: " "${kept_warning}" text "${text}")
  string(REPLACE "\nneuron-cache: error: " "${kept_error}" text "${text}")
  string(REGEX REPLACE "\nneuron-cache: [^\n]*" "" text "${text}")
  string(REGEX REPLACE "\n[A-Z][a-z]+( done)?: [0-9][^\n]*" "" text "${text}")
  string(REPLACE "${kept_warning}" "\nneuron-cache: warning: " text "${text}")
  string(REPLACE "${kept_error}" "\nneuron-cache: error: " text "${text}")
  string(STRIP "${text}" text)
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Runs `neuron-cache prefetch` now: TOOL (a path), MANIFEST, EXPORT_DIR, RUN_PREFIX (a command
# prefix, e.g. `cmake -E env ...`), SHARED_ARGS (--repo, --cache-dir, --strict), CONFIGS (none:
# all). Sets present (name;dir pairs), missing, fetched, local_count, report, failed,
# input_error (the tool refused its input: exit 2) and tool_warnings.
# The tool's stderr is shown as it comes (ECHO_ERROR_VARIABLE, CMake 3.18): a long download
# prints its progress lines during the configure, not after it; stdout is the JSON report.
# Since its words are already on the screen, the messages here refer to them, never repeat them.
function(_neuron_cache_prefetch_now)
  cmake_parse_arguments(PARSE_ARGV 0 my "" "TOOL;MANIFEST;EXPORT_DIR"
                        "RUN_PREFIX;SHARED_ARGS;CONFIGS")
  _neuron_cache_config_args(config_args ${my_CONFIGS})
  execute_process(
    COMMAND ${my_RUN_PREFIX} "${my_TOOL}" prefetch "${my_MANIFEST}" ${config_args} ${my_SHARED_ARGS}
            --export-dir "${my_EXPORT_DIR}" --json --progress
    WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
    OUTPUT_VARIABLE report ERROR_VARIABLE errors RESULT_VARIABLE rc
    ECHO_ERROR_VARIABLE)
  _neuron_cache_without_progress(errors "${errors}")
  set(failed "")
  set(input_error FALSE)
  set(tool_warnings "")
  if(rc EQUAL 2)
    # A typo in CONFIGS or the manifest: the call is wrong, so no configuration is reported as
    # merely missing (the valid ones would vanish too and generate fail later, far from here).
    set(input_error TRUE)
    string(CONCAT failed "neuron-cache refused the call's input (exit 2; its message is above)\n"
           "Fix the neuron_cache_prefetch() arguments or the manifest")
  elseif(NOT rc EQUAL 0)
    set(failed "neuron-cache prefetch failed (${rc}; its message is above)")
  else()
    string(JSON count ERROR_VARIABLE json_error LENGTH "${report}" configurations)
    string(JSON format ERROR_VARIABLE format_error GET "${report}" format_version)
    list(FIND _NEURON_CACHE_REPORT_FORMATS "${format}" format_known)
    if(json_error)
      set(failed "neuron-cache prefetch printed no readable report (${json_error})")
    elseif(format_error OR format_known EQUAL -1)
      if(format_error)
        set(format "(none)")
      endif()
      string(CONCAT failed "${my_TOOL} writes JSON reports of format ${format}; this "
             "NeuronCache.cmake reads format ${_NEURON_CACHE_REPORT_FORMAT}: use the neuron-cache "
             "of the same release as this module")
    else()
      # Cache problems the tool worked around (Hub down, no access): its words are already
      # shown (echoed live above); the warning only marks them for CMake's summary.
      if(NOT errors MATCHES "^[ \t\r\n]*$")
        string(CONCAT tool_warnings "neuron-cache worked around a problem with the cache (its "
               "message is above); the build goes on")
      endif()
    endif()
  endif()
  set(present "")
  set(missing "")
  set(fetched 0)
  set(local_count 0)
  if(failed STREQUAL "" AND count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON name GET "${report}" configurations ${i} name)
      string(JSON dir_type TYPE "${report}" configurations ${i} export_dir)
      if(NOT dir_type STREQUAL "STRING")
        list(APPEND missing "${name}")
        continue()
      endif()
      string(JSON dir GET "${report}" configurations ${i} export_dir)
      list(APPEND present "${name}" "${dir}")
      # status is meant to be the state before the step; prefetch reports it after the step, so
      # a planned download (files_to_download) is what tells a Hub hit from a local one.
      string(JSON status GET "${report}" configurations ${i} status)
      string(JSON files GET "${report}" configurations ${i} files_to_download)
      if(status STREQUAL "store" OR status STREQUAL "hub" OR files GREATER 0)
        math(EXPR fetched "${fetched} + 1")
      else()
        math(EXPR local_count "${local_count} + 1")
      endif()
    endforeach()
  elseif(NOT failed STREQUAL "")
    set(missing ${my_CONFIGS})
    set(report "")
  endif()
  foreach(var present missing fetched local_count report failed input_error tool_warnings)
    set(${var} "${${var}}" PARENT_SCOPE)
  endforeach()
endfunction()

# A custom target (part of ALL) running the tool at build time. A stamp plus an arguments file
# rewritten only on change make it re-run when the manifest, the tool or the arguments change,
# not at every build. STEM names it, MANIFEST and TOOL (a path) or TOOL_TARGET (an in-tree
# target) are what it depends on. Sets step_target.
function(_neuron_cache_build_step kind commands_var byproducts_var)
  cmake_parse_arguments(PARSE_ARGV 3 my "" "STEM;MANIFEST;TOOL;TOOL_TARGET" "")
  set(stem "${my_STEM}")
  _neuron_cache_target_name(stem_name "${stem}")
  set(step_target "neuron_cache_${kind}_${stem_name}")
  set(n 2)
  while(TARGET ${step_target})
    set(step_target "neuron_cache_${kind}_${stem_name}_${n}")
    math(EXPR n "${n} + 1")
  endwhile()
  set(side "${CMAKE_BINARY_DIR}/neuron-cache/${step_target}")
  string(REPLACE ";" "\n" arguments "${${commands_var}}")
  set(previous "")
  if(EXISTS "${side}.args")
    file(READ "${side}.args" previous)
  endif()
  if(NOT previous STREQUAL arguments)
    file(WRITE "${side}.args" "${arguments}")
  endif()
  set(depends "${my_MANIFEST}" "${side}.args")
  if(my_TOOL_TARGET)
    list(APPEND depends ${my_TOOL_TARGET})
  else()
    list(APPEND depends "${my_TOOL}")
  endif()
  add_custom_command(
    OUTPUT "${side}.stamp"
    ${${commands_var}}
    COMMAND "${CMAKE_COMMAND}" -E touch "${side}.stamp"
    BYPRODUCTS ${${byproducts_var}}
    DEPENDS ${depends}
    WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}"
    COMMENT "neuron-cache: ${kind} ${stem} at build time"
    USES_TERMINAL VERBATIM)
  add_custom_target(${step_target} ALL DEPENDS "${side}.stamp")
  set(step_target ${step_target} PARENT_SCOPE)
endfunction()

# The build-time commands: compile (which prefetches first) the NAMES, push ALL_CONFIGS when PUSH,
# or only prefetch when the tool is not built yet at configure time. TOOL, TOOL_TARGET, MANIFEST,
# STEM, EXPORT_DIR, RUN_PREFIX and SHARED_ARGS as for _neuron_cache_prefetch_now and
# _neuron_cache_build_step. Sets step_target.
function(_neuron_cache_add_build_time kind)
  cmake_parse_arguments(PARSE_ARGV 1 my "PUSH" "TOOL;TOOL_TARGET;MANIFEST;STEM;EXPORT_DIR"
                        "RUN_PREFIX;SHARED_ARGS;NAMES;ALL_CONFIGS")
  _neuron_cache_config_args(config_args ${my_NAMES})
  set(exe "${my_TOOL}")
  if(my_TOOL_TARGET)
    set(exe "$<TARGET_FILE:${my_TOOL_TARGET}>")
  endif()
  set(commands "")
  list(LENGTH my_NAMES names)
  # No name would mean every configuration of the manifest: with nothing missing, only push.
  if(NOT kind STREQUAL "compile" OR names GREATER 0)
    list(APPEND commands COMMAND ${my_RUN_PREFIX} "${exe}" ${kind} "${my_MANIFEST}" ${config_args}
                         ${my_SHARED_ARGS} --export-dir "${my_EXPORT_DIR}" --quiet --progress)
  endif()
  if(kind STREQUAL "compile")
    if(names GREATER 0)
      list(APPEND commands --output-dir "${CMAKE_BINARY_DIR}/neuron-cache/${my_STEM}.output")
    endif()
    if(my_PUSH)
      _neuron_cache_config_args(all_config_args ${my_ALL_CONFIGS})
      list(APPEND commands COMMAND ${my_RUN_PREFIX} "${exe}" push "${my_MANIFEST}"
                           ${all_config_args} ${my_SHARED_ARGS} --quiet --progress)
    endif()
  endif()
  set(byproducts "")
  foreach(name IN LISTS my_NAMES)
    list(APPEND byproducts "${my_EXPORT_DIR}/${name}/neuron-cache-entry.json")
  endforeach()
  _neuron_cache_build_step(${kind} commands byproducts STEM "${my_STEM}" MANIFEST "${my_MANIFEST}"
                           TOOL "${my_TOOL}" TOOL_TARGET "${my_TOOL_TARGET}")
  set(step_target ${step_target} PARENT_SCOPE)
endfunction()

# NeuronCache::<name>: a real INTERFACE library (so it can depend on the build step) behind an
# alias (names with "::" are reserved for aliases and imported targets), and its old alias.
function(_neuron_cache_add_target name dir step)
  _neuron_cache_target_name(safe "${name}")
  _neuron_cache_id(id "${name}")
  if(safe STREQUAL "neuron-cache" OR safe STREQUAL "neuron_cache")
    message(FATAL_ERROR "neuron_cache_prefetch: the configuration name \"${name}\" would be the "
                        "target NeuronCache::${safe}, which is the tool's or the library's: "
                        "rename the configuration in the manifest")
  endif()
  set(real "neuron_cache_config_${safe}")
  if(NOT TARGET ${real})
    add_library(${real} INTERFACE)
    add_library(NeuronCache::${safe} ALIAS ${real})
    add_library(neuron_cache::${safe} ALIAS ${real})
  endif()
  set_target_properties(${real} PROPERTIES
    NEURON_CACHE_ARTIFACTS_DIR "${dir}"
    NEURON_CACHE_DIR "${dir}"
    INTERFACE_COMPILE_DEFINITIONS
      "NEURON_CACHE_ARTIFACTS_${id}=\"${dir}\";NEURON_CACHE_DIR_${id}=\"${dir}\"")
  if(step)
    add_dependencies(${real} ${step})
  endif()
endfunction()

# NeuronCache::<name> of a configuration that has no artifacts (and no COMPILE_MISSING): defined
# all the same, so a plain target_link_libraries() configures, and marked NEURON_CACHE_MISSING.
# It depends on a step that fails with the configuration's name and what to do: the build stops at
# the first thing that links it, saying why, instead of CMake's "target not found" at generate.
function(_neuron_cache_add_missing_target name)
  _neuron_cache_target_name(safe "${name}")
  set(fail "neuron_cache_missing_${safe}")
  if(NOT TARGET ${fail})
    string(CONCAT why "NeuronCache::${safe} has no artifacts: neuron_cache_prefetch() found none "
           "for the configuration \"${name}\" at configure time (its message then said why). "
           "Configure again once the cache store holds them, or pass COMPILE_MISSING to compile "
           "it during the build.")
    add_custom_target(${fail}
      COMMAND ${CMAKE_COMMAND} -E echo "${why}"
      COMMAND ${CMAKE_COMMAND} -E false
      VERBATIM)
  endif()
  _neuron_cache_add_target("${name}" "" "${fail}")
  set_target_properties(neuron_cache_config_${safe} PROPERTIES NEURON_CACHE_MISSING TRUE)
endfunction()

# "; NAME: the store's entry is not installed: WHY" for each configuration whose store entry the
# tool refused for its signatures (the report's `refused`; reports without it have none).
function(_neuron_cache_refusals out report)
  set(text "")
  string(JSON count ERROR_VARIABLE count_error LENGTH "${report}" configurations)
  if(NOT count_error AND count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON type ERROR_VARIABLE type_error TYPE "${report}" configurations ${i} refused)
      if(NOT type_error AND type STREQUAL "STRING")
        string(JSON name GET "${report}" configurations ${i} name)
        string(JSON why GET "${report}" configurations ${i} refused)
        string(APPEND text "; ${name}: the store's entry is not installed: ${why}")
      endif()
    endforeach()
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# "2 local, 1 from the Hub (3.1 MiB), ...": BYTES downloaded, the REPORT, the LOCAL_COUNT and
# FETCHED counts, the MISSING names, COMPILE_MISSING as given to neuron_cache_prefetch().
function(_neuron_cache_summary out)
  cmake_parse_arguments(PARSE_ARGV 1 my "COMPILE_MISSING" "BYTES;REPORT;LOCAL_COUNT;FETCHED"
                        "MISSING")
  set(report "${my_REPORT}")
  set(missing ${my_MISSING})
  _neuron_cache_size(size "${my_BYTES}")
  # The store as the tool names it (storage::describe): the Hub keeps its words.
  set(where "the Hub")
  if(NOT report STREQUAL "")
    string(JSON store_kind ERROR_VARIABLE store_error GET "${report}" store)
    if(store_kind STREQUAL "s3")
      set(where "S3")
    elseif(store_kind STREQUAL "folder")
      set(where "the shared folder")
    endif()
  endif()
  set(text "${my_LOCAL_COUNT} local, ${my_FETCHED} from ${where} (${size})")
  list(LENGTH missing missing_count)
  if(missing_count GREATER 0 AND my_COMPILE_MISSING)
    string(APPEND text ", ${missing_count} to compile at build time")
  elseif(missing_count GREATER 0)
    list(JOIN missing ", " names)
    string(APPEND text ", missing: ${names} (add COMPILE_MISSING to compile them at build time)")
  endif()
  if(NOT report STREQUAL "")
    _neuron_cache_refusals(refusals "${report}")
    string(APPEND text "${refusals}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(neuron_cache_prefetch)
  cmake_parse_arguments(PARSE_ARGV 0 arg
                        "COMPILE_MISSING;PUSH;READ_ONLY;OFFLINE;STRICT;LOCKED;REQUIRE_SIGNATURES"
                        "MANIFEST;CACHE_REPO;CACHE_DIR;OUTPUT_VARIABLE;LOCKFILE"
                        "CONFIGS;TRUSTED_KEYS")
  set(manifest_given FALSE)
  if(DEFINED arg_MANIFEST)
    set(manifest_given TRUE)
  endif()
  _neuron_cache_check_arguments("${arg_UNPARSED_ARGUMENTS}" "${arg_KEYWORDS_MISSING_VALUES}"
                                ${manifest_given})
  get_filename_component(manifest "${arg_MANIFEST}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${manifest}" OR IS_DIRECTORY "${manifest}")
    message(FATAL_ERROR "neuron_cache_prefetch: manifest ${manifest} not found (a relative "
                        "MANIFEST is read from CMAKE_CURRENT_SOURCE_DIR)")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${manifest}")
  get_filename_component(stem "${manifest}" NAME_WLE)
  set(export_dir "${CMAKE_BINARY_DIR}/neuron-cache/${stem}")

  set(repo "${arg_CACHE_REPO}")
  if(repo STREQUAL "")
    set(repo "${NEURON_CACHE_REPO}")
  endif()
  set(cache_dir "${arg_CACHE_DIR}")
  if(cache_dir STREQUAL "")
    set(cache_dir "${NEURON_CACHE_CACHE_DIR}")
  endif()
  if(cache_dir STREQUAL "" AND NOT NEURON_CACHE_DIR STREQUAL "")
    message(DEPRECATION "neuron_cache_prefetch: NEURON_CACHE_DIR is the old name of "
                        "NEURON_CACHE_CACHE_DIR: set that instead")
    set(cache_dir "${NEURON_CACHE_DIR}")
  endif()
  # Only what CMake was told goes on the command line; the rest the tool reads from the
  # environment, as it would outside CMake.
  set(shared_args "")
  if(NOT repo STREQUAL "")
    list(APPEND shared_args --repo "${repo}")
  endif()
  if(NOT cache_dir STREQUAL "")
    get_filename_component(cache_dir "${cache_dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    list(APPEND shared_args --cache-dir "${cache_dir}")
  endif()
  set(strict OFF)
  if(arg_STRICT OR NEURON_CACHE_STRICT)
    set(strict ON)
    list(APPEND shared_args --strict)
  endif()
  foreach(key IN LISTS arg_TRUSTED_KEYS)
    list(APPEND shared_args --trusted-key "${key}")
  endforeach()
  if(arg_REQUIRE_SIGNATURES)
    list(APPEND shared_args --require-signatures)
  endif()
  if(arg_LOCKED OR DEFINED arg_LOCKFILE)
    # Exactly the locked bytes (neuron-cache lock): nothing to compile or push here.
    if(arg_COMPILE_MISSING OR arg_PUSH)
      message(FATAL_ERROR "neuron_cache_prefetch: LOCKED installs the lockfile's files only: "
                          "leave out COMPILE_MISSING and PUSH (fill the cache with neuron-cache "
                          "ci, then neuron-cache lock)")
    endif()
    set(lockfile "${arg_LOCKFILE}")
    if(lockfile STREQUAL "")
      get_filename_component(manifest_dir "${manifest}" DIRECTORY)
      set(lockfile "${manifest_dir}/neuron-cache.lock")
    endif()
    get_filename_component(lockfile "${lockfile}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${lockfile}")
    list(APPEND shared_args --locked --lockfile "${lockfile}")
  endif()
  # The tool words its advice for a CMake user (how to give it a token, say).
  set(run_prefix "${CMAKE_COMMAND}" -E env NEURON_CACHE_FRONT_END=cmake)
  if(arg_OFFLINE OR NEURON_CACHE_OFFLINE)
    # Every store, not only the Hub (HF_HUB_OFFLINE would leave S3 and a shared folder online).
    list(APPEND run_prefix NEURON_CACHE_OFFLINE=1)
  endif()
  set(push OFF)
  if(arg_PUSH AND (arg_READ_ONLY OR NEURON_CACHE_READ_ONLY))
    message(STATUS "neuron-cache: READ_ONLY: the compiled configurations are not pushed")
  elseif(arg_PUSH)
    set(push ON)
  endif()

  _neuron_cache_find_tool()
  # What every build-time step is given (the helpers read nothing of this function's scope).
  set(build_time_args TOOL "${tool}" TOOL_TARGET "${tool_target}" MANIFEST "${manifest}"
                      STEM "${stem}" EXPORT_DIR "${export_dir}" RUN_PREFIX ${run_prefix}
                      SHARED_ARGS ${shared_args} ALL_CONFIGS ${arg_CONFIGS})
  if(push)
    list(APPEND build_time_args PUSH)
  endif()
  if(tool_target)
    _neuron_cache_prefetch_later()
  else()
    _neuron_cache_prefetch_at_configure()
  endif()

  foreach(pair IN LISTS results)
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 name)
    list(GET pair 1 dir)
    _neuron_cache_id(id "${name}")
    set(NEURON_CACHE_ARTIFACTS_${id} "${dir}" PARENT_SCOPE)
    set(NEURON_CACHE_${id}_DIR "${dir}" PARENT_SCOPE)
  endforeach()
  if(arg_OUTPUT_VARIABLE)
    set(${arg_OUTPUT_VARIABLE} "${with_artifacts}" PARENT_SCOPE)
    set(${arg_OUTPUT_VARIABLE}_MISSING "${missing}" PARENT_SCOPE)
    set(${arg_OUTPUT_VARIABLE}_REPORT "${report}" PARENT_SCOPE)
  endif()
endfunction()

# Configure-time path. Sets results (name|dir items), with_artifacts, missing, report.
macro(_neuron_cache_prefetch_at_configure)
  _neuron_cache_count_label(requested ${arg_CONFIGS})
  _neuron_cache_repo_label(repo_label "${manifest}" "${repo}")
  message(CHECK_START "neuron-cache: prefetching ${requested} from ${repo_label}")
  _neuron_cache_prefetch_now(TOOL "${tool}" MANIFEST "${manifest}" EXPORT_DIR "${export_dir}"
                             RUN_PREFIX ${run_prefix} SHARED_ARGS ${shared_args}
                             CONFIGS ${arg_CONFIGS})
  if(NOT failed STREQUAL "")
    message(CHECK_FAIL "failed")
    if(strict OR input_error)
      message(FATAL_ERROR "neuron_cache_prefetch: ${failed}")
    endif()
    message(WARNING "neuron_cache_prefetch: ${failed}\nThe configurations are reported missing.")
    set(bytes 0)
  else()
    string(JSON bytes GET "${report}" totals bytes_downloaded)
    file(WRITE "${CMAKE_BINARY_DIR}/neuron-cache/${stem}.report.json" "${report}")
  endif()
  set(compile_missing "")
  if(arg_COMPILE_MISSING)
    set(compile_missing COMPILE_MISSING)
  endif()
  _neuron_cache_summary(summary BYTES "${bytes}" REPORT "${report}" LOCAL_COUNT "${local_count}"
                        FETCHED "${fetched}" MISSING ${missing} ${compile_missing})
  if(failed STREQUAL "" AND (missing STREQUAL "" OR arg_COMPILE_MISSING))
    message(CHECK_PASS "${summary}")
  elseif(failed STREQUAL "")
    message(CHECK_FAIL "${summary}")
  endif()
  if(NOT tool_warnings STREQUAL "")
    message(WARNING "${tool_warnings}")
  endif()

  set(step "")
  if(arg_COMPILE_MISSING AND (NOT missing STREQUAL "" OR push))
    _neuron_cache_add_build_time(compile NAMES ${missing} ${build_time_args})
    set(step ${step_target})
  endif()
  set(results "")
  set(with_artifacts "")
  while(NOT present STREQUAL "")
    list(POP_FRONT present name dir)
    list(APPEND results "${name}|${dir}")
    list(APPEND with_artifacts "${name}")
    _neuron_cache_add_target("${name}" "${dir}" "${step}")
  endwhile()
  if(arg_COMPILE_MISSING)
    foreach(name IN LISTS missing)
      list(APPEND results "${name}|${export_dir}/${name}")
      _neuron_cache_add_target("${name}" "${export_dir}/${name}" "${step}")
    endforeach()
  else()
    foreach(name IN LISTS missing)
      _neuron_cache_add_missing_target("${name}")
    endforeach()
  endif()
endmacro()

# Build-time path (the in-tree tool is not built yet): the folders are known, their content comes
# with the build step. Sets results, with_artifacts (all of CONFIGS), missing (empty), report.
macro(_neuron_cache_prefetch_later)
  if(NOT DEFINED arg_CONFIGS)
    message(FATAL_ERROR "neuron_cache_prefetch: the neuron-cache tool is built by this project, so "
                        "the prefetch runs at build time and needs CONFIGS <names...> to define "
                        "the targets; or set NEURON_CACHE_TOOL to an installed neuron-cache to "
                        "prefetch at configure time")
  endif()
  _neuron_cache_count_label(requested ${arg_CONFIGS})
  if(arg_COMPILE_MISSING)
    _neuron_cache_add_build_time(compile NAMES ${arg_CONFIGS} ${build_time_args})
  else()
    _neuron_cache_add_build_time(prefetch NAMES ${arg_CONFIGS} ${build_time_args})
  endif()
  message(STATUS "neuron-cache: ${requested} of ${stem} prefetched at build "
                 "time by ${step_target} (the tool is built by this project)")
  set(results "")
  foreach(name IN LISTS arg_CONFIGS)
    list(APPEND results "${name}|${export_dir}/${name}")
    _neuron_cache_add_target("${name}" "${export_dir}/${name}" "${step_target}")
  endforeach()
  set(with_artifacts ${arg_CONFIGS})
  set(missing "")
  set(report "")
endmacro()
