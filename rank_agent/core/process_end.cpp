// How a captured process ends off the agent's own paths: termination
// signals, crashes and _exit close the shard first, then end the process as
// they would have without the agent.

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "agent_parts.h"
#include "code_location.h"
#include "rankscope/model/signals.h"
#include "rankscope/model/text.h"

namespace rankscope::agent {

std::atomic<int> g_end_asked{0};
std::atomic<int> g_terminating_signal{0};
std::atomic<int> g_exit_called{0};
std::atomic<int> g_exit_status{0};
std::atomic<int> g_crash_signal{0};
std::atomic<int> g_crash_code{0};  // si_code where the kernel raised it; 0 where a process sent it
std::atomic<uint64_t> g_crash_address{0};
std::atomic<int> g_crash_thread{0};
std::atomic<uint64_t> g_crash_instruction{0};  // where a fault the kernel raised happened; 0: not one
std::atomic<int64_t> g_crash_at_ns{0};          // on the rank's clock
std::atomic<int> g_crash_sender{0};             // the pid that sent it, where a process did
std::atomic<bool> g_crash_claimed{false};       // by the first thread to crash, whose crash the counters describe
constinit thread_local OwnThread t_own_thread = OwnThread::kNone;
ExitFunction g_next_exit = nullptr;

// The signals that end a process as mpirun does; the agent closes the shard
// before they take effect.
constexpr int kTerminationSignals[] = {SIGTERM, SIGINT};

sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal_number : kTerminationSignals) sigaddset(&set, signal_number);
  return set;
}

// A crash on another thread: its handler ends the process once its shard is
// closed and the crash passed on, as the crash would have at once. A thread
// that would end the process otherwise (exit, _exit, a held termination
// signal) waits for it meanwhile; the crashing thread itself (a handler of
// the program's that exits once the agent's returned) does not.
void let_a_crash_end_the_process() {
  if (g_crash_claimed.load(std::memory_order_acquire) &&
      g_crash_thread.load(std::memory_order_acquire) != static_cast<int>(::gettid())) {
    wait_for(5, [] { return false; });
  }
}

// A termination signal that came while the shard was closing waits for the
// close (held back on the closing thread, or in its handler on another): the
// thread that closed it, or waited for the close, must not carry on to end
// the process normally, with another status, while the signal's handler
// finishes its wait. The process ends by the signal, as it would have on its
// arrival without the agent. Not on the agent's own threads, whose close was
// asked by the signal's handler, nor where _exit gives the status.
void end_by_held_signal() {
  if (t_own_thread != OwnThread::kNone || g_exit_called.load(std::memory_order_acquire) != 0) return;
  let_a_crash_end_the_process();
  if (const int signal_number = g_terminating_signal.load(std::memory_order_acquire); signal_number != 0) {
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
  }
}


// A crash the handler caught, as an instant on the crashing thread's track
// at the instant it came: "crash: SIGSEGV in crash_app+0x12a4"
// (docs/format.md, "Crashes"). Before the final flush, which writes its
// name and track.
bool Agent::write_crash() {
  const int signal_number = g_crash_signal.load(std::memory_order_acquire);
  if (signal_number == 0 || crash_written_) return true;
  crash_written_ = true;
  const auto thread = static_cast<uint64_t>(g_crash_thread.load(std::memory_order_relaxed));
  char thread_name[64] = "thread";
  if (const int fd = ::open(printf_string("/proc/self/task/%llu/comm", static_cast<unsigned long long>(thread)).c_str(),
                            O_RDONLY | O_CLOEXEC);
      fd >= 0) {
    const ssize_t got = ::read(fd, thread_name, sizeof(thread_name) - 1);
    ::close(fd);
    if (got > 1) thread_name[got - 1] = '\0';  // without its newline
  }
  const uint32_t thread_name_id = recorder_.strings().intern(std::string(thread_name) + " " + std::to_string(thread));
  const uint32_t track = recorder_.tracks().find_or_add(TrackType::kThread, thread, -1,
                                                        thread_name_id == kNoId ? 0 : thread_name_id);
  const std::string where = code_location(g_crash_instruction.load(std::memory_order_relaxed));
  const uint32_t name_id = recorder_.strings().intern(std::string(kCrashInstantPrefix) + signal_name(signal_number) +
                                                      (where.empty() ? "" : std::string(kCrashInstantWhere) + where));
  if (track == kNoId || name_id == kNoId) return true;  // counted where the tables were full
  Event crash{};
  crash.kind = EventKind::kInstant;
  crash.begin_ns = crash.end_ns = g_crash_at_ns.load(std::memory_order_relaxed);
  crash.name_id = name_id;
  crash.track = static_cast<uint16_t>(track);
  crash.peer = kNoPeer;
  return write_failed_ || writer_.write_events(std::span<Event>(&crash, 1));
}



// Has the closer close the shard, and waits for it: only async-signal-safe
// work, as a signal handler and _exit need. A second end (another thread's
// signal, _exit in a handler) waits for the same close.
void close_before_end(Agent& agent) {
  if (g_end_asked.exchange(1, std::memory_order_acq_rel) == 0) agent.ask_close();
  wait_for(1, [&] { return agent.closed(); });
}

// mpirun ends the other ranks with SIGTERM when one rank dies. The agent
// has its closer close the shard first, then the signal does what it
// would have done: those ranks' shards are whole, and only the rank that
// really died shows as dead.
void on_terminate(int signal_number) {
  Agent* a = agent();
  if (a && a->in_this_process()) {
    int none = 0;
    g_terminating_signal.compare_exchange_strong(none, signal_number, std::memory_order_acq_rel);
    close_before_end(*a);
    // Another thread is in _exit, with the status the process is to end
    // with, or in a crash, which is to end it: it ends the process once the
    // shard is closed.
    if (g_exit_called.load(std::memory_order_acquire) != 0) wait_for(1, [] { return false; });
    let_a_crash_end_the_process();
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

// Only where the application left the default in place: its own handler stays its own.
void handle_termination() {
  for (const int signal_number : kTerminationSignals) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction handler {};
    handler.sa_handler = on_terminate;
    sigemptyset(&handler.sa_mask);
    ::sigaction(signal_number, &handler, nullptr);
  }
}

// A crash (kCrashSignals) ends the process before the flusher's next
// write, and the events it loses are its last ones, which say what it was
// doing. The crash handler has the closer close the shard, as on_terminate
// does, then passes the signal on to the action the agent found there, so
// that the process ends as it would have: with Open MPI's backtrace, a core
// dump, the same status. Only where the program left the default in place
// once under way: a handler of its own (a runtime that recovers from faults,
// Rust's or a JVM's, Python's faulthandler) is left alone.
// Per signal, the action the agent found, written before its handler is
// put in place, and read only by that handler.
struct sigaction g_action_found[NSIG];
// Whether the handlers were put in place: a runtime that looks for the
// default at its start (Rust's standard library, a JVM, Open MPI's
// MPI_Init) must find it, so they go in once the program is under way, at
// the end of MPI_Init or at the flusher's first wake, whichever is first;
// MPI_Init reserves the choice while it runs, and waits for a placing under
// way, which would otherwise put handlers where Open MPI looks for the default.
enum class CrashHandlers : int { kNotYet, kPlacing, kPlaced, kMpiInitRunning };
std::atomic<CrashHandlers> g_crash_handlers{CrashHandlers::kNotYet};
void on_crash(int signal_number, siginfo_t* info, void* context);

bool crash_handler_in_place(int signal_number) {
  struct sigaction current {};
  return ::sigaction(signal_number, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
         current.sa_sigaction == on_crash;
}

void put_crash_handler(int signal_number, const struct sigaction& found) {
  g_action_found[signal_number] = found;
  struct sigaction handler {};
  handler.sa_sigaction = on_crash;
  // From the handler's first instruction (hold_termination_signals).
  handler.sa_mask = termination_signals();
  // On the alternate stack where the thread has one: a stack overflow is a crash too.
  handler.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigaction(signal_number, &handler, nullptr);
}

void place_crash_handlers() {
  for (const int signal_number : rankscope::kCrashSignals) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      put_crash_handler(signal_number, current);
    }
  }
}

// At the flusher's first wake.
void place_crash_handlers_once() {
  CrashHandlers not_yet = CrashHandlers::kNotYet;
  if (g_crash_handlers.compare_exchange_strong(not_yet, CrashHandlers::kPlacing)) {
    place_crash_handlers();
    g_crash_handlers.store(CrashHandlers::kPlaced, std::memory_order_release);
  }
}

#ifndef BUS_MCEERR_AO
#define BUS_MCEERR_AO 5
#endif
#ifndef SEGV_MTEAERR
#define SEGV_MTEAERR 8
#endif

// Whether the fault comes again as the instruction runs again: the kernel
// raised it for this instruction (not a memory error found later, or a
// tag check the hardware made after the fact).
bool fault_comes_again(int signal_number, const siginfo_t* info) {
  if (!info || info->si_code <= 0) return false;
  if (signal_number == SIGBUS && info->si_code == BUS_MCEERR_AO) return false;
  if (signal_number == SIGSEGV && info->si_code == SEGV_MTEAERR) return false;
  return signal_number != SIGABRT;
}

// The signal again, with its siginfo, queued to this thread: it comes as
// this handler returns, in the context the crash came in (no frame of the
// agent's in a backtrace), and before any signal sent to the process
// meanwhile, which waits for the process-wide queue. Whether the fault
// would come again as the instruction runs again no longer matters:
// another thread may have mapped the page since.
bool queue_to_this_thread(int signal_number, siginfo_t* info) {
  return info && ::syscall(SYS_rt_tgsigqueueinfo, ::getpid(), ::gettid(), signal_number, info) == 0;
}

// The action found there takes the signal, as it would have without the
// agent. Where the queue refuses (a seccomp filter), a fault the kernel
// raised comes again as the instruction runs again, and a signal sent
// (abort(), kill) is sent again. A handler put after the agent's that calls
// it as the action before it (chaining) is left in place: the agent does
// what the action it found would have done.
void pass_crash_on(int signal_number, siginfo_t* info, void* context) {
  if (crash_handler_in_place(signal_number)) {
    ::sigaction(signal_number, &g_action_found[signal_number], nullptr);
    if (!queue_to_this_thread(signal_number, info) && !fault_comes_again(signal_number, info)) ::raise(signal_number);
    return;
  }
  const struct sigaction found = g_action_found[signal_number];
  // As the kernel would, for the next time: that handler may return, and the fault come again.
  if (found.sa_flags & SA_RESETHAND) g_action_found[signal_number] = {};
  if (found.sa_handler == SIG_IGN) return;
  if (found.sa_handler == SIG_DFL) {
    // The default action, now: the signal is blocked in the handler that called this one.
    ::signal(signal_number, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal_number);
    ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
    ::raise(signal_number);
    return;
  }
  if (found.sa_flags & SA_SIGINFO) {
    found.sa_sigaction(signal_number, info, context);
  } else {
    found.sa_handler(signal_number);
  }
}

// The instruction a fault the kernel raised stopped the thread at.
uint64_t faulting_instruction(const void* context) {
  const auto* machine = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return static_cast<uint64_t>(machine->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return machine->uc_mcontext.pc;
#else
  (void)machine;
  return 0;
#endif
}

// mpirun's SIGTERM, sent once another rank died, may come while the crash
// closes the shard, or as it goes on: held back on this thread, here (a
// handler that chains to the agent's brings no mask of the agent's) and in
// the context the crash goes on in (restored as the handler returns), it
// cannot end the process before the crash does, with another status and
// without the crash's core dump or Open MPI's backtrace.
void hold_termination_signals(void* context) {
  const sigset_t termination = termination_signals();
  ::pthread_sigmask(SIG_BLOCK, &termination, nullptr);
  if (context) {
    sigset_t& resumed = static_cast<ucontext_t*>(context)->uc_sigmask;
    for (const int signal_number : kTerminationSignals) sigaddset(&resumed, signal_number);
  }
}

void on_crash(int signal_number, siginfo_t* info, void* context) {
  const int errno_found = errno;
  Agent* a = agent();
  if (a && a->in_this_process() && t_own_thread == OwnThread::kNone) {
    hold_termination_signals(context);
    if (!g_crash_claimed.exchange(true, std::memory_order_acq_rel)) {
      g_crash_at_ns.store(a->now(), std::memory_order_relaxed);
      const bool by_kernel = info && info->si_code > 0;
      g_crash_code.store(by_kernel ? info->si_code : 0, std::memory_order_relaxed);
      // si_addr: the fault's address (SIGSEGV, SIGBUS) or instruction (SIGFPE, SIGILL).
      g_crash_address.store(by_kernel && signal_number != SIGABRT ? reinterpret_cast<uintptr_t>(info->si_addr) : 0,
                            std::memory_order_relaxed);
      g_crash_instruction.store(by_kernel && context ? faulting_instruction(context) : 0, std::memory_order_relaxed);
      g_crash_sender.store(!by_kernel && info ? static_cast<int>(info->si_pid) : 0, std::memory_order_relaxed);
      g_crash_thread.store(static_cast<int>(::gettid()), std::memory_order_relaxed);
      g_crash_signal.store(signal_number, std::memory_order_release);
    } else {
      // Another thread's crash, being recorded: the close must find it whole.
      for (int spins = 0; g_crash_signal.load(std::memory_order_acquire) == 0 && spins < 1'000'000; ++spins) {
      }
    }
    close_before_end(*a);
  }
  pass_crash_on(signal_number, info, context);
  errno = errno_found;
}

// The main thread's alternate signal stack, where it has none: the crash
// handler's only way to run when the stack itself overflowed. Below it a
// page no one may touch, so that overflowing it faults rather than writes
// over the mapping beneath. A program that sets its own replaces it.
void give_main_thread_a_signal_stack() {
  stack_t current {};
  if (::sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t size = std::max<size_t>(64 * 1024, static_cast<size_t>(::sysconf(_SC_SIGSTKSZ)) * 4);
  void* memory = ::mmap(nullptr, page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (memory == MAP_FAILED) return;
  const stack_t stack{static_cast<char*>(memory) + page, 0, size};
  if (::mprotect(memory, page, PROT_NONE) != 0 || ::sigaltstack(&stack, nullptr) != 0) ::munmap(memory, page + size);
}


}  // namespace rankscope::agent

using rankscope::agent::agent;


// Open MPI puts its own crash handlers (a backtrace) only where it finds the
// default action: the agent's step aside for PMPI_Init, or wait for it to
// be placed, and then pass a crash on to what it put there.
namespace rankscope::agent {
namespace {
struct sigaction g_action_before_mpi_init[NSIG];
}  // namespace
}  // namespace rankscope::agent

void rankscope_agent_before_mpi_init(int* aside) {
  namespace agent_ns = rankscope::agent;
  *aside = 0;
  // A process that does not capture keeps every action as it is.
  if (auto* a = agent(); !a || !a->in_this_process()) return;
  auto not_yet = agent_ns::CrashHandlers::kNotYet;
  if (!agent_ns::g_crash_handlers.compare_exchange_strong(not_yet, agent_ns::CrashHandlers::kMpiInitRunning)) {
    agent_ns::wait_for(1, [] { return agent_ns::g_crash_handlers.load() != agent_ns::CrashHandlers::kPlacing; });
  }
  for (const int signal_number : rankscope::kCrashSignals) {
    ::sigaction(signal_number, nullptr, &agent_ns::g_action_before_mpi_init[signal_number]);
    if (!agent_ns::crash_handler_in_place(signal_number)) continue;
    ::sigaction(signal_number, &agent_ns::g_action_found[signal_number], nullptr);
    *aside |= 1 << signal_number;
  }
}

void rankscope_agent_after_mpi_init(int aside) {
  namespace agent_ns = rankscope::agent;
  if (auto* a = agent(); !a || !a->in_this_process()) return;
  const bool placing_now = agent_ns::g_crash_handlers.load() == agent_ns::CrashHandlers::kMpiInitRunning;
  for (const int signal_number : rankscope::kCrashSignals) {
    struct sigaction current {};
    if (::sigaction(signal_number, nullptr, &current) != 0) continue;
    const struct sigaction& before = agent_ns::g_action_before_mpi_init[signal_number];
    // MPI's own, put where it found the default (what the agent stepped aside for, or the default itself).
    const bool put_by_mpi = current.sa_handler != before.sa_handler && before.sa_handler == SIG_DFL;
    if ((aside & (1 << signal_number)) || (placing_now && (current.sa_handler == SIG_DFL || put_by_mpi))) {
      agent_ns::put_crash_handler(signal_number, current);
    }
  }
  if (placing_now) agent_ns::g_crash_handlers.store(agent_ns::CrashHandlers::kPlaced);
}


// Open MPI ends a rank with _exit when MPI aborts it (an error under
// MPI_ERRORS_ARE_FATAL, a peer lost), as do programs that skip their exit
// handlers (Python's os._exit): no atexit runs. The shard is closed first,
// with the calls the rank was inside, and the status said.
namespace {
[[noreturn]] void exit_after_closing(int status) {
  namespace agent_ns = rankscope::agent;
  if (auto* a = agent(); a && a->in_this_process()) {
    // No signal handled on this thread may end the process meanwhile with another status.
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_BLOCK, &all, nullptr);
    if (!a->closed()) {
      agent_ns::g_exit_status.store(status, std::memory_order_relaxed);
      agent_ns::g_exit_called.store(1, std::memory_order_release);
      agent_ns::close_before_end(*a);
    }
    agent_ns::let_a_crash_end_the_process();
  }
  if (agent_ns::g_next_exit) agent_ns::g_next_exit(status);
  for (;;) ::syscall(SYS_exit_group, status);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void _exit(int status) { exit_after_closing(status); }
extern "C" __attribute__((visibility("default"))) void _Exit(int status) { exit_after_closing(status); }
