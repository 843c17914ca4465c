// The compile step's leases (remote/leases.h): before compiling a miss this machine claims the
// configuration's lease in the store; a miss another machine holds is waited for and fetched
// from its push, or compiled here when its holder stopped without a result (a killed runner: the
// lease expires) or the wait goes past its bound.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "neuron_cache/error.h"
#include "neuron_cache/format/lease.h"
#include "neuron_cache/format/printable.h"
#include "neuron_cache/log/log.h"
#include "neuron_cache/net/retry.h"
#include "neuron_cache/pipeline/lease_step.h"
#include "neuron_cache/sys/duration.h"

namespace neuron_cache::pipeline {

using Clock = std::chrono::steady_clock;

struct LeaseCoordinator::Waiting {
  plan::PlanRow* row = nullptr;
  LeaseOutcome outcome;
  Clock::time_point since;
  Clock::time_point deadline;  // past it, compile without the lease
  Clock::time_point said;      // when the last progress line about it was shown
};

std::string_view lease_kind_name(LeaseOutcome::Kind kind) {
  switch (kind) {
    case LeaseOutcome::Kind::Held:
      return "held";
    case LeaseOutcome::Kind::TookOver:
      return "took_over";
    case LeaseOutcome::Kind::Fetched:
      return "waited_then_fetched";
    case LeaseOutcome::Kind::WaitTimedOut:
      return "wait_timed_out";
    case LeaseOutcome::Kind::NotWaited:
      return "not_waited";
    case LeaseOutcome::Kind::NoLease:
      return "no_lease";
  }
  return "no_lease";
}

namespace {

namespace ai = artifact_index;

// Without --wait-timeout and without an estimate from the holder: "else an hour".
constexpr int64_t kDefaultWaitSeconds = 3600;
// Beyond the holder's estimate: compile times vary with the machine and its load (x 1.25 + 10 min).
constexpr int64_t kEstimateMarginSeconds = 600;
// How often a waiting configuration's progress line is repeated.
constexpr auto kProgressEvery = std::chrono::seconds(60);
// The longest pause between polls while the store cannot be read: an outage only slows polling.
constexpr auto kMaxPollPause = std::chrono::milliseconds(60'000);

// The pause before the next round of polls: the poll interval, doubled for each round in a row
// that could not read the store (up to kMaxPollPause, never below the interval), with +-20%
// jitter so that the waiters of a fleet do not poll the store in step.
std::chrono::milliseconds poll_pause(std::chrono::milliseconds every, int failed_rounds) {
  auto pause = every;
  for (int i = 0; i < failed_rounds && pause < kMaxPollPause; ++i) pause *= 2;
  pause = std::max(every, std::min(pause, kMaxPollPause));
  return net::jittered(pause, 0.2);
}

std::string host_name(const config::Settings& settings) {
  if (!settings.runner_name.value.empty()) return printable(settings.runner_name.value);
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "an unnamed host";
  return printable(name);
}

// "12:03 UTC"
std::string clock_time(int64_t seconds) {
  std::string text = lease::time_text(seconds);  // no date past year 9999
  return text.ends_with("Z") ? text.substr(11, 5) + " UTC" : text;
}

// A lease's seconds as every length of time is shown (sys::duration_text): "40 s", "41 min".
std::string minutes(int64_t seconds) {
  return sys::duration_text(static_cast<double>(seconds));
}

// The seconds a wait took, whole (a steady clock's difference: finite and small).
int64_t whole_seconds(double seconds) {
  return static_cast<int64_t>(std::ceil(std::clamp(seconds, 0.0, 1e15)));
}

// How long a machine that finds `lease` waits for it at most. The lease is another machine's
// word: without --wait-timeout the wait is at most the longest life of a lease, whatever it says.
// How long it has compiled is a difference of its own times (its holder's clock), never read
// against this machine's clock.
std::chrono::seconds wait_bound(const lease::Record& lease, const LeasePolicy& policy) {
  if (policy.wait_timeout) return *policy.wait_timeout;
  int64_t expected = lease::expected_whole_seconds(lease.expected_seconds);  // <= 48 h
  if (expected == 0) return std::chrono::seconds(kDefaultWaitSeconds);
  int64_t ran = 0;  // a damaged lease's times may be anything: never overflowing
  if (__builtin_sub_overflow(lease.heartbeat, lease.started, &ran)) ran = 0;
  ran = std::clamp(ran, int64_t{0}, lease::kMaxCompileSeconds);
  int64_t left = expected + expected / 4 + kEstimateMarginSeconds - ran;
  return std::chrono::seconds(std::clamp(left, kEstimateMarginSeconds, lease::kMaxLifeSeconds));
}

// The time on this machine's clock `deadline` falls at: for messages only.
int64_t wall_time_of(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count();
  return lease::add_seconds(fleet::Leases::now(), left);
}

// "llama-bs1 is being compiled by runner-7 since 12:03 UTC, expected 41 min from its last
// compile; waiting until 12:54 UTC" (the holder's clock, then this machine's)
std::string being_compiled(const lease::Record& lease, Clock::time_point deadline) {
  std::string text = printable(lease.configuration) + " is being compiled by " +
                     printable(lease.host) + " since " + clock_time(lease.started);
  if (int64_t expected = lease::expected_whole_seconds(lease.expected_seconds); expected > 0)
    text += ", expected " + minutes(expected) + " from its last compile";
  return text + "; waiting until " + clock_time(wall_time_of(deadline));
}

// "the lease of runner-7 is damaged or hostile (its heartbeat ... is in the future): set aside"
std::string why_damaged(const lease::Record& lease, const std::string& why) {
  return "the lease of " + printable(lease.host) + " is damaged or hostile (" + why +
         "): set aside";
}

// Why `lease` no longer protects its configuration, for the note of a take-over.
std::string why_free(const lease::Record& lease, const fleet::Verdict& verdict) {
  if (verdict.damaged) return why_damaged(lease, *verdict.damaged);
  if (lease.state == lease::State::Released)
    return printable(lease.host) + " released it without a result (" +
           printable(lease.note, kPrintableMessage) + ")";
  if (lease.state == lease::State::Done)
    return printable(lease.host) +
           " marked it done but the store has no entry for it that this machine may "
           "install";
  if (fleet::Leases::holder_ended(lease))
    return "the run on this machine that held it (" + printable(lease.host) +
           ") has ended without a result";
  return printable(lease.host) + "'s lease was not renewed for " + minutes(verdict.unrenewed) +
         ", past the " + minutes(verdict.life) +
         " its holder promised, without a result (its runner stopped renewing it)";
}

}  // namespace

LeaseCoordinator::LeaseCoordinator(RunContext& run, Compiler& compiler, Publisher& publisher,
                                   std::function<PrefetchStep(plan::Plan&)> prefetch)
    : run_(run), compiler_(compiler), publisher_(publisher), prefetch_(std::move(prefetch)) {}

LeaseCoordinator::~LeaseCoordinator() = default;

bool LeaseCoordinator::active() {
  return leases() != nullptr;
}

fleet::Leases* LeaseCoordinator::leases() {
  if (leases_) return leases_->get();
  leases_.emplace();
  if (!run_.options.leases.enabled || run_.options.read_only || !run_.writer ||
      run_.writer->offline() || !run_.writer->unreachable().empty())
    return nullptr;
  try {
    if (std::string why = run_.writer->why_not_writable(); !why.empty()) {
      run_.note(false,
                "no compile leases (" + why +
                    "): other machines may compile the same configurations at the same time");
      return nullptr;
    }
    fleet::LeaseOptions options;
    options.ttl = run_.settings.lease_ttl();
    options.host = host_name(run_.settings);
    options.conflicts = run_.options.push.conflicts;
    *leases_ = std::make_unique<fleet::Leases>(*run_.writer, options);
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::Input) throw;  // a malformed setting
    rethrow_local_disk(error);
    run_.cache_problem("compile leases in " + run_.repo + " cannot be used: " + error.what(),
                       "compiling without them");
  }
  return leases_->get();
}

std::vector<LeaseCoordinator::Waiting> LeaseCoordinator::claim_each(
    const std::vector<plan::PlanRow*>& rows, const std::vector<fleet::ClaimRequest>& requests,
    CompileStep& step, std::vector<plan::PlanRow*>& mine) {
  std::vector<fleet::Claim> claims;
  std::string failure;
  try {
    claims = (*leases_)->claim(requests);  // one commit on the Hub for all of them
  } catch (const Error& error) {
    rethrow_local_disk(error);
    failure = error.what();
    run_.note(true,
              "no compile leases from " + run_.repo + ": " + failure + ": compiling without them");
  }
  std::vector<Waiting> waiting;
  for (size_t i = 0; i < rows.size(); ++i) {
    LeaseOutcome o;
    o.configuration = rows[i]->target.configuration.name;
    o.key = rows[i]->target.key;
    if (!failure.empty()) {
      o.kind = LeaseOutcome::Kind::NoLease;
      o.note = failure;
    } else if (const fleet::Claim& claim = claims[i]; claim.taken) {
      run_.holds_leases = true;
      if (claim.other) o.other_host = printable(claim.other->host);
      o.kind = claim.took_over ? LeaseOutcome::Kind::TookOver : LeaseOutcome::Kind::Held;
      if (claim.took_over) o.note = why_free(*claim.other, claim.verdict);
      if (claim.other && claim.verdict.damaged)
        run_.note(true, o.configuration + ": " + o.note + "; compiling it here");
    } else if (!run_.options.leases.wait) {
      o.other_host = printable(claim.other->host);
      o.kind = LeaseOutcome::Kind::NotWaited;
      o.note = "--no-wait: compiled although " + o.other_host + " compiles it too";
    } else {
      o.other_host = printable(claim.other->host);
      Clock::time_point deadline = Clock::now() + wait_bound(*claim.other, run_.options.leases);
      waiting.push_back({rows[i], o, Clock::now(), deadline, Clock::now()});
      if (claim.other->state == lease::State::Compiling)
        run_.progress(being_compiled(*claim.other, deadline));
      continue;
    }
    step.leases.push_back(o);
    mine.push_back(rows[i]);
  }
  return waiting;
}

void LeaseCoordinator::compile(plan::Plan& plan, const std::vector<plan::PlanRow*>& misses,
                               CompileStep& step, std::vector<plan::PlanRow*>& compiled) {
  try {
    step.leases_advisory = !(*leases_)->enforced();
  } catch (const Error& error) {
    rethrow_local_disk(error);
    step.leases_advisory = true;
  }
  if (step.leases_advisory) {
    run_.note(true,
              storage::describe(run_.writer) +
                  " does not refuse conditional writes (If-None-Match), so compile leases are "
                  "advisory: two machines may, rarely, compile the same configuration");
  }
  std::vector<plan::PlanRow*> mine, keyed;
  std::vector<fleet::ClaimRequest> requests;
  for (plan::PlanRow* row : misses) {
    const plan::Target& t = row->target;
    if (row->status == plan::Status::Registry) {
      // optimum-neuron's hub proxy fetches its graphs in seconds: nothing worth a lease.
      mine.push_back(row);
      continue;
    }
    if (t.unkeyed.empty()) {
      keyed.push_back(row);
      // The estimate may come from the store's records: bounded, or the others would read this
      // machine's lease as damaged.
      requests.push_back({t.inputs.compiler_version, t.key, t.configuration.name,
                          lease::bounded_expected(compiler_.expected_seconds(*row))});
      continue;
    }
    LeaseOutcome o;
    o.configuration = t.configuration.name;
    o.key = t.key;
    o.kind = LeaseOutcome::Kind::NoLease;
    o.note = "no cache key: " + t.unkeyed;
    step.leases.push_back(o);
    mine.push_back(row);
  }
  size_t first = compiled.size();
  compiler_.compile_rows(mine, step, compiled);  // registry hits and rows without a key: no lease
  release_failed(compiled, step, first);
  // As many leases at a time as this machine compiles at once, each batch just before its
  // compiles: a machine that claimed everything first would compile it all in a row while the
  // others sat idle waiting for it.
  std::vector<Waiting> waiting;
  size_t batch = static_cast<size_t>(std::max(1, run_.options.jobs));
  for (size_t at = 0; at < keyed.size(); at += batch) {
    size_t end = std::min(keyed.size(), at + batch);
    std::vector<plan::PlanRow*> taken;
    std::vector<Waiting> more =
        claim_each({keyed.begin() + at, keyed.begin() + end},
                   {requests.begin() + at, requests.begin() + end}, step, taken);
    waiting.insert(waiting.end(), more.begin(), more.end());
    first = compiled.size();
    compiler_.compile_rows(taken, step, compiled);
    release_failed(compiled, step, first);
  }
  if (waiting.empty()) return;
  publish_before_waiting(plan, compiled, step);
  wait_for_others(plan, waiting, step, compiled);
}

void LeaseCoordinator::publish_before_waiting(const plan::Plan& plan,
                                              const std::vector<plan::PlanRow*>& compiled,
                                              CompileStep& step) {
  compiler_.mark_compiled(compiled, step);
  early_pushes_.push_back(push(plan));
}

PushStep LeaseCoordinator::push(const plan::Plan& plan) {
  fleet::Leases* held = leases_ ? leases_->get() : nullptr;
  if (!held) return publisher_.push(plan);
  // Other machines wait for this push: an outage met earlier in the run (by a renewal of the
  // leases) that has ended must not skip it. One attempt: a store still down fails it again.
  if (run_.writer) run_.writer->look_again();
  PushStep step =
      publisher_.push(plan, [held](const std::string& head, const std::vector<std::string>& keys) {
        return held->done_in_commit(head, keys);
      });
  const storage::CommitResult& commit = step.result.commit;
  // A retry that found its earlier attempt landed cannot tell which writes were in it.
  held->after_commit(step.attempted && step.skipped_reason.empty() && commit.committed &&
                     commit.landed_unanswered.empty());
  finish(plan, step);
  return step;
}

void LeaseCoordinator::wait_for_others(const plan::Plan& plan, std::vector<Waiting>& waiting,
                                       CompileStep& step, std::vector<plan::PlanRow*>& compiled) {
  std::vector<bool> settled(waiting.size(), false);
  int failed_rounds = 0;
  for (bool first = true;; first = false) {
    if (!first) std::this_thread::sleep_for(poll_pause(run_.settings.lease_poll(), failed_rounds));
    poll_failed_ = false;
    // An outage marks the store unreachable for the rest of the run; a waiter asks again.
    if (run_.writer) run_.writer->look_again();
    bool all = true;
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (!settled[i]) settled[i] = poll_other(plan, waiting[i], step, compiled);
      all = all && settled[i];
    }
    failed_rounds = poll_failed_ ? failed_rounds + 1 : 0;
    if (all) break;
  }
  for (const Waiting& w : waiting) step.leases.push_back(w.outcome);
}

bool LeaseCoordinator::poll_other(const plan::Plan& plan, Waiting& w, CompileStep& step,
                                  std::vector<plan::PlanRow*>& compiled) {
  const plan::Target& t = w.row->target;
  fleet::Leases& leases = *leases_->get();
  w.outcome.waited_seconds = std::chrono::duration<double>(Clock::now() - w.since).count();
  std::optional<fleet::Observed> now;
  try {
    now = leases.read(t.inputs.compiler_version, t.key);
  } catch (const Error& error) {
    rethrow_local_disk(error);
    // A failure is not a free lease: wait on, up to the bound.
    poll_failed_ = true;
    log::debug("lease",
               "could not read the lease of " + t.configuration.name + ": " + error.what());
    if (Clock::now() < w.deadline) return false;
    now = std::nullopt;
  }
  const bool waits = now && now->verdict.waits;
  if (!waits) {
    // Done, released, expired or gone: the holder may have pushed before it stopped.
    Refetch got = fetch_after_wait(*w.row, step);
    if (got == Refetch::Fetched) {
      w.outcome.kind = LeaseOutcome::Kind::Fetched;
      run_.progress("fetched " + t.configuration.name + " compiled by " + w.outcome.other_host +
                    " (waited " + minutes(whole_seconds(w.outcome.waited_seconds)) + ")");
      return true;
    }
    if (got == Refetch::Failed && Clock::now() < w.deadline) return false;
  }
  if (waits) {
    if (Clock::now() < w.deadline) {
      if (Clock::now() - w.said >= kProgressEvery) {
        w.said = Clock::now();
        run_.progress(being_compiled(now->record, w.deadline));
      }
      return false;
    }
    w.outcome.kind = LeaseOutcome::Kind::WaitTimedOut;
    w.outcome.note = "waited " + minutes(whole_seconds(w.outcome.waited_seconds)) + " for " +
                     printable(now->record.host) + "; compiled here without the lease";
    run_.note(true, t.configuration.name + ": " + w.outcome.note);
    compiler_.compile_rows({w.row}, step, compiled);
    publish_before_waiting(plan, compiled, step);
    return true;
  }
  try {
    fleet::Claim claim =
        leases.claim(t.inputs.compiler_version, t.key, t.configuration.name,
                     now ? lease::bounded_expected(now->record.expected_seconds) : 0, true);
    if (!claim.taken) {  // another waiter took it over first: wait for that one now
      if (claim.other) {
        w.outcome.other_host = printable(claim.other->host);
        if (!run_.options.leases.wait_timeout)
          w.deadline = Clock::now() + wait_bound(*claim.other, run_.options.leases);
      }
      return false;
    }
    run_.holds_leases = true;
    w.outcome.kind = LeaseOutcome::Kind::TookOver;
    w.outcome.note = now ? why_free(now->record, now->verdict)
                         : "its lease is gone and the store has no entry for it that this "
                           "machine may install";
  } catch (const Error& error) {
    rethrow_local_disk(error);
    if (Clock::now() < w.deadline) return false;
    w.outcome.kind = LeaseOutcome::Kind::WaitTimedOut;
    w.outcome.note = std::string("the lease could not be taken over: ") + error.what();
  }
  run_.note(false, t.configuration.name + ": " + w.outcome.note + "; compiling it here");
  compile_leased(*w.row, step, compiled);
  publish_before_waiting(plan, compiled, step);
  return true;
}

void LeaseCoordinator::compile_leased(plan::PlanRow& row, CompileStep& step,
                                      std::vector<plan::PlanRow*>& compiled) {
  size_t first = compiled.size();
  compiler_.compile_rows({&row}, step, compiled);
  release_failed(compiled, step, first);
}

void LeaseCoordinator::release_failed(const std::vector<plan::PlanRow*>& compiled,
                                      const CompileStep& step, size_t first) {
  std::vector<fleet::LeaseEnd> ends;
  for (size_t i = first; i < compiled.size(); ++i) {
    const CompileOutcome& o = step.outcomes[i];
    if (!o.ok)
      ends.push_back({compiled[i]->target.inputs.compiler_version, o.key, lease::State::Released,
                      "its compile failed: " + o.error});
  }
  try {
    (*leases_)->finish(ends);  // at once: the machines waiting for them take over
  } catch (const Error& error) {
    rethrow_local_disk(error);
    log::debug("lease", std::string("could not release the leases of failed compiles: ") +
                            error.what() + " (they expire by themselves)");
  }
}

LeaseCoordinator::Refetch LeaseCoordinator::fetch_after_wait(plan::PlanRow& row,
                                                             CompileStep& step) {
  if (!run_.writer) return Refetch::Failed;
  plan::Plan one;
  try {
    // Read through the store itself, not the miss policy: a read that failed must not pass for
    // a configuration the store lacks (that would compile it a second time).
    auto fresh = std::make_unique<remote::RemoteIndex>(
        remote::RemoteIndex::open(*run_.writer, run_.memo_folder()));
    one = plan::make_plan({row.target}, *run_.local_index, fresh.get(), "", run_.trust);
    // An index file that could not be read intact may hold the holder's entry.
    if (!fresh->complete()) throw operational_error(fresh->why_incomplete());
    if (one.rows.empty() || one.rows[0].status == plan::Status::Compile ||
        one.rows[0].status == plan::Status::Registry)
      return Refetch::Absent;
    run_.remote = std::move(fresh);  // its revision has the holder's push
  } catch (const Error& error) {
    rethrow_local_disk(error);
    poll_failed_ = true;
    log::debug("lease", "could not read the index for " + row.target.configuration.name + ": " +
                            error.what());
    return Refetch::Failed;
  }
  step.fetched += prefetch_(one);
  if (one.rows[0].status != plan::Status::Local) return Refetch::Failed;
  row.status = plan::Status::Local;
  row.entry = one.rows[0].entry;
  row.reason = "compiled by another machine meanwhile, then fetched";
  return Refetch::Fetched;
}

void LeaseCoordinator::finish(const plan::Plan& plan, const PushStep& step) {
  if (!leases_ || !*leases_) return;
  std::set<std::string> stored(step.result.pushed.begin(), step.result.pushed.end());
  stored.insert(step.result.already_stored.begin(), step.result.already_stored.end());
  const bool nothing_new = !step.attempted && step.skipped_reason == publisher_.why_not_push(true);
  const std::string why = step.skipped_reason.empty() ? "its push did not include it"
                                                      : "its push failed: " + step.skipped_reason;
  std::vector<fleet::LeaseEnd> ends;
  for (const auto& row : plan.rows) {
    bool done =
        row.status == plan::Status::Local && (stored.count(row.target.key) > 0 || nothing_new);
    ends.push_back({row.target.inputs.compiler_version, row.target.key,
                    done ? lease::State::Done : lease::State::Released, done ? "" : why});
  }
  // A push that met an outage still ends them, or the machines waiting for them wait until they
  // expire (on the Hub, once renewed, 30 minutes and more). While the store cannot be reached it
  // is asked again with the waiters' backoff, for at most a lease's life unrenewed, and never
  // past the leases' own expiry: then the waiters take them over anyway.
  const std::chrono::seconds asking{
      std::min<int64_t>(run_.settings.lease_ttl().count(), (*leases_)->seconds_left(ends))};
  const Clock::time_point give_up = Clock::now() + asking;
  for (int failed = 0;; ++failed) {
    if (run_.writer) run_.writer->look_again();
    try {
      (*leases_)->finish(ends);  // only the leases this process holds; one commit on the Hub
      return;
    } catch (const Error& error) {
      rethrow_local_disk(error);
      const auto pause = poll_pause(run_.settings.lease_poll(), failed + 1);
      const bool outage = run_.writer && !run_.writer->unreachable().empty();
      if (!outage || Clock::now() + pause > give_up) {
        run_.note(true, "the compile leases could not be ended: " + std::string(error.what()) +
                            " (they expire by themselves)");
        return;
      }
      if (failed == 0) {
        run_.progress("the compile leases other machines wait for could not be ended (" +
                      run_.brief(error.what()) + "): asking again for up to " +
                      minutes(asking.count()));
      }
      std::this_thread::sleep_for(pause);
    }
  }
}

}  // namespace neuron_cache::pipeline
