// Capture windows: --steps and --capture-range (ranges steer the recorder),
// --delay and --duration, the control file's triggers, and the flight
// recorder's dumps (--ring, SIGUSR2); what the shard says of them.

#include <fcntl.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>

#include "agent_parts.h"
#include "rankscope/model/steps.h"
#include "rankscope/model/text.h"

namespace rankscope::agent {

// --steps and --capture-range, once the string table is there: the range
// name to look for is interned, so that a range's id says whether it is one.
void Agent::steer_by_ranges() {
  const std::string& steps_text = settings_.steps;
  const std::string& range_text = settings_.capture_range;
  if (!steps_text.empty()) {
    const auto steps = parse_step_selection(steps_text);
    if (!steps) return report(std::string("capture window ignored: ") + kEnvSteps + "=" + steps_text + " is not " +
                              std::string(kStepSelectionForms));
    range_windows_.steer_by_steps(*steps, std::string("--steps ") + steps_text);
  } else if (!range_text.empty()) {
    CaptureRange range;
    const std::string option = std::string("--capture-range ") + range_text;
    if (!parse_capture_range(range_text, range)) {
      return report(std::string("capture window ignored: ") + kEnvCaptureRange + "=" + range_text + " is not one");
    }
    if (range.kind == CaptureRange::Kind::kCudaProfilerApi) {
      range_windows_.steer_by_profiler_api(option);
    } else {
      const uint32_t name_id = recorder_.strings().intern(range.name);
      if (name_id == kNoId) return report(option + " ignored: the string table is full");
      const uint64_t domain_key = range.domain.empty() ? RangeWindows::kAnyDomain
                                                       : uint64_t{recorder_.strings().intern(range.domain)} + 1;
      range_windows_.steer_by_range(name_id, domain_key, option);
    }
  } else {
    return;
  }
  // The window open from the start (--steps :B) is the ranges' first.
  const auto [from, until] = recorder_.window();
  window_was_open_ = from < until;
  windows_opened_ = 0;
}


// Once the capture was steered (a window set, or closed, in any way): the
// windows closed since the last write, and the one open now, so that the
// report knows which steps the shard holds in full. Written when they
// change; at the end, the open one closed there.
bool Agent::write_steered_windows(int64_t now, bool final_flush) {
  const auto [from, until] = recorder_.window();
  steered_ = steered_ || from != INT64_MIN || until != INT64_MAX || recorder_.windows_closed() != 0;
  if (!steered_) return true;
  const int64_t start = capture_started_ns();
  window_batch_.clear();
  windows_unrecorded_ += recorder_.windows_closed_since(windows_noted_, window_batch_);
  // The current window as far as it has come: closed, open, or not begun.
  std::optional<int64_t> open_since;
  if (from <= now) {
    const CaptureWindow current{std::max(from, start), std::min(until, now)};
    if (until > now && !final_flush) {
      open_since = current.from_ns;
    } else if (!closed_window_written_ || closed_window_written_->from_ns != current.from_ns ||
               closed_window_written_->until_ns != current.until_ns) {
      window_batch_.push_back(current);
      closed_window_written_ = current;
    }
  }
  for (CaptureWindow& w : window_batch_) w = {std::max(w.from_ns, start), std::min(w.until_ns, now)};
  std::erase_if(window_batch_, [](const CaptureWindow& w) { return w.from_ns >= w.until_ns; });
  if (window_batch_.empty() && open_since == open_window_written_ && (windows_written_ || !final_flush)) return true;
  if (open_since) window_batch_.push_back({*open_since, kWindowStillOpen});
  if (!writer_.write_capture_windows(window_batch_, WindowHolds::kEventsBegun, now)) return false;
  open_window_written_ = open_since;
  windows_written_ = true;
  return true;
}


// Each time the flusher wakes: the window's edges, set ahead of their time
// so that each rank cuts at that instant of its clock. --delay and
// --duration count from the job's start on the wall clock (the same instant
// on every rank); the triggers of the control file, read once a second at
// most, are set one at a time, each at the wall-clock time it names.
void Agent::steer_window() {
  const int64_t wall = wall_now_ns(), now = clock_.now_ns();
  int64_t job_start = 0, start_wall = 0, start_local = 0;
  {
    std::lock_guard lock(metadata_mutex_);
    job_start = metadata_.job.start_wall_ns != 0 ? metadata_.job.start_wall_ns : metadata_.start_wall_ns;
    start_wall = metadata_.start_wall_ns;
    start_local = metadata_.start_local_ns;
  }
  const auto local = [&](int64_t wall_ns) { return wall_ns - start_wall + start_local; };
  if (!triggered_ && (delay_ns_ >= 0 || duration_ns_ >= 0)) {
    const int64_t from = local(job_start + std::max<int64_t>(delay_ns_, 0));
    recorder_.set_window(delay_ns_ > 0 ? from : INT64_MIN, duration_ns_ >= 0 ? from + duration_ns_ : INT64_MAX);
  }
  if (wall - control_checked_ns_ >= 1'000'000'000) {
    control_checked_ns_ = wall;
    read_triggers(start_wall);
  }
  if (!triggers_.empty() && !triggered_) {
    // The first trigger takes over from --delay and --duration, in the
    // state their window is in at its time.
    const int64_t at = local(triggers_.front().at_wall_ns);
    const auto [from, until] = recorder_.window();
    if (from <= at && at < until) trigger_open_since_ = from;
    trigger_closed_at_ = at;
    triggered_ = true;
  }
  if (triggered_) steer_by_triggers(now, local);
  // Ranges open and close windows between two wakes unseen: they count their
  // own; triggers count and say theirs as they are carried out.
  const auto [from, until] = recorder_.window();
  const bool open = from <= now && now < until;
  if (open != window_was_open_) {
    window_was_open_ = open;
    const bool by_ranges = range_windows_.steering();
    if (!by_ranges && !triggered_) windows_opened_ += open ? 1 : 0;
    const std::string by = by_ranges ? range_windows_.option() : open ? "--delay" : "--duration";
    if (rank_ == 0 && !triggered_) report(std::string(open ? "capture started (" : "capture paused (") + by + ")");
  }
}

// The control file holds the latest triggers, one a line, oldest first:
// those sent between two reads (a second apart) are all taken, in order.
void Agent::read_triggers(int64_t start_wall_ns) {
  const int fd = ::open(control_file_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[kControlFileMaxBytes];
  const ssize_t got = ::read(fd, text, sizeof(text));
  ::close(fd);
  if (got <= 0) return;
  std::string_view rest(text, static_cast<size_t>(got));
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    if (end == std::string_view::npos) break;  // a line cut short is no trigger
    Trigger trigger;
    // A trigger older than this rank is an earlier run's, left in the same folder.
    if (parse_trigger(rest.substr(0, end + 1), trigger) && trigger.serial > trigger_serial_ &&
        trigger.at_wall_ns >= start_wall_ns) {
      trigger_serial_ = trigger.serial;
      triggers_.push_back(trigger);
      range_windows_.stop_steering();
    }
    rest.remove_prefix(end + 1);
  }
}

// Carries out the triggers that are due, in order, then sets the window
// ahead to the next ones: open until the next stop, or from the next start
// to the stop after it, so that every rank cuts at the same instant and a
// window shorter than the flusher's wake is kept whole.
void Agent::steer_by_triggers(int64_t now, const std::function<int64_t(int64_t)>& local) {
  while (!triggers_.empty() && local(triggers_.front().at_wall_ns) <= now) {
    const Trigger trigger = triggers_.front();
    triggers_.erase(triggers_.begin());
    const int64_t at = local(trigger.at_wall_ns);
    if (trigger.action == TriggerAction::kStart && !trigger_open_since_) {
      trigger_open_since_ = at;
      ++windows_opened_;
      if (rank_ == 0) report("capture started (rankscope trigger " + std::to_string(trigger.serial) + ")");
    } else if (trigger.action == TriggerAction::kStop && trigger_open_since_) {
      trigger_open_since_.reset();
      trigger_closed_at_ = at;
      if (rank_ == 0) report("capture paused (rankscope trigger " + std::to_string(trigger.serial) + ")");
    } else if (trigger.action == TriggerAction::kDump) {
      dump_ring("rankscope trigger dump", at);
    }
  }
  std::optional<int64_t> from = trigger_open_since_;
  int64_t until = INT64_MAX;
  for (const Trigger& next : triggers_) {
    if (!from && next.action == TriggerAction::kStart) {
      from = local(next.at_wall_ns);
    } else if (from && next.action == TriggerAction::kStop) {
      until = local(next.at_wall_ns);
      break;
    }
  }
  const auto [was_from, was_until] = recorder_.window();
  if (from && *from == was_from) {
    recorder_.set_window(*from, until);
    return;
  }
  // Another window than the recorder's: the recorder's ends where the
  // triggers closed it, and stays among the past windows for late records.
  recorder_.set_window(was_from, std::min(was_until, trigger_closed_at_));
  recorder_.open_window(from.value_or(INT64_MAX), from ? until : INT64_MAX);
}

// Writes the flight recorder's window now, and the counters with it.
void Agent::dump_ring(const char* asked_by, int64_t at_ns) {
  if (!ring_on()) {
    if (rank_ == 0) report(std::string(asked_by) + ": this job has no --ring, and writes everything as it comes");
    return;
  }
  flush_once(Flush::kDump, at_ns);
  if (!writer_.write_counters(counters(), clock_.now_ns())) ++shard_write_errors_;
  report(printf_string("%s: wrote the last %.1f s of events (--ring)", asked_by, static_cast<double>(ring_ns_) * 1e-9));
}


std::string Agent::range_windows_summary() const {
  if (const uint64_t windows = range_windows_.windows_opened(); windows != 0) {
    return std::to_string(windows) + (windows == 1 ? " capture window" : " capture windows") + " recorded, " +
           std::to_string(recorder_.outside_window()) + " events outside counted on this rank";
  }
  const std::string nothing = "no capture window opened, so no event was recorded";
  if (!range_windows_.option().starts_with("--steps")) return nothing + " (no such range began on this rank)";
  const uint64_t highest = range_windows_.highest_step_seen();
  if (highest == RangeWindows::kNoStep) return nothing + " (no ProfilerStep#N range began on this rank)";
  return nothing + " (the highest step that began: ProfilerStep#" + std::to_string(highest) + ")";
}


// With --ring, SIGUSR2 (mpirun passes it to every rank) writes what the
// ring holds; only where the application left the default in place, which
// would have ended the process.
void handle_ring_dump() {
  struct sigaction current {};
  if (::sigaction(SIGUSR2, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction handler {};
  handler.sa_handler = [](int) {
    if (Agent* a = agent(); a && a->in_this_process()) {
      a->ask_ring_dump();
    }
  };
  sigemptyset(&handler.sa_mask);
  handler.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR2, &handler, nullptr);
}


}  // namespace rankscope::agent
