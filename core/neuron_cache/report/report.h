// What a run did, for people and for machines: the JSON report (`ci --report`), the Markdown
// summary (`ci --summary`, GitHub's job summary) and the plan table printed by `plan`.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "neuron_cache/pipeline/pipeline.h"
#include "neuron_cache/pipeline/run.h"
#include "neuron_cache/plan/plan.h"

namespace neuron_cache::report {

using pipeline::RunResult;

struct Totals {
  size_t configurations = 0;
  size_t local = 0;       // complete locally before the run
  size_t store_hits = 0;  // fetched from the store
  size_t misses = 0;      // had to be compiled
  size_t refused = 0;     // of which the store had an entry the trust policy refused
  size_t compiled = 0;    // compiled successfully
  // Reused from the Hub through optimum-neuron's hub proxy by their compile command, which
  // compiled nothing: hits, neither compiled nor misses.
  size_t reused = 0;
  size_t failed = 0;              // compile failed
  size_t not_installed = 0;       // on the Hub, but prefetch could not install them
  uint64_t bytes_downloaded = 0;  // by prefetch and by the compile step (completing adoptions)
  uint64_t bytes_linked = 0;   // taken from the HF file cache instead (what the proxy downloaded)
  uint64_t bytes_reused = 0;   // of the folders recorded for the reused configurations
  uint64_t bytes_resumed = 0;  // of files an interrupted prefetch had partly downloaded
  uint64_t bytes_uploaded = 0;
  double compile_seconds = 0;        // spent compiling
  double compile_seconds_saved = 0;  // recorded compile time of every hit
};
Totals totals(const RunResult& run);

// The JSON report's format (core/neuron_cache/report/report.schema.json): raised when a key goes
// away or changes meaning. The CMake module and the Bazel rule refuse a format they do not know.
// Format 2: a row cached in the store has status "store" (format 1: "hub", whichever the store).
inline constexpr int kReportFormatVersion = 2;

nlohmann::json plan_json(const plan::Plan& plan);
// `plan --json --files`: gives each cached row of `plan_report` (made by plan_json) the files of
// its entry's MODULE_ folders, with their size, sha256 and a URL a build system downloads them
// from (Bazel's rctx.download): `file://` for a folder complete in `local`, else the store's
// (Store::download_url: the Hub's resolve URL pinned at the plan's revision, a shared folder's
// file:// URL; none for S3, whose requests must be signed: then `url` is left out and the
// caller prefetches first). And `entry`: the entry's text, as an export's
// neuron-cache-entry.json holds it. Never a token or a signature: URLs only.
void add_files(nlohmann::json& plan_report, const plan::Plan& plan, const local::LocalIndex& local,
               const storage::Store* store);
nlohmann::json run_json(const RunResult& run);
std::string plan_text(const plan::Plan& plan);
// "in commit 1a2b3c4d5e6f: 3 files sent (1.2 GiB), 4 already stored"
std::string commit_text(const storage::CommitResult& commit);
// "3 files sent (1.2 GiB), 4 already stored"
std::string sent_text(const storage::CommitResult& commit);
// One line on the push of `run` (which must have one): skipped, failed, or what it sent where
// (a Hub commit, else the store named). `what` names the things pushed.
std::string push_line(const RunResult& run, const std::string& what = "configuration");
// "compile leases: 2 held, 1 waited then fetched\n", or "" when the compile step used none.
std::string lease_line(const pipeline::CompileStep& step);
// The push of `run` with a profile or configuration (`owner`: "profile NAME", "configuration
// NAME") to `store` (none reads as the Hub): what the store got, or why nothing.
std::string run_push_line(const pipeline::PushStep& step, const storage::Store* store,
                          const std::string& owner);
// The push of a run's MODULE folders without an index entry (`run` without --config/--profile).
std::string modules_push_line(const pipeline::PushStep& step, const storage::Store* store);
std::string run_markdown(const RunResult& run);

// "1.5 GiB", "12.0 KiB", "512 B": powers of 1024 with their IEC names. (status and cleanup keep
// optimum-neuron's "KB"/"MB" wording for the same powers: local/cleanup.h format_size.)
std::string human_bytes(uint64_t bytes);

}  // namespace neuron_cache::report
