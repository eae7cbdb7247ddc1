// The Wait and Test families' wrappers: each records the operations it
// completes. A Test that completes nothing is a poll, counted rather than
// recorded, and shown as its thread's polling under the hang watch
// (mpi_shim.h, "polls").
#include <algorithm>
#include <vector>

#include "mpi_shim.h"

using namespace rankscope;
using namespace rankscope::agent;

namespace {

// Request handles and statuses copied before a Wait or Test overwrites them;
// thread-local and grown only when a call passes more than ever before.
struct CompletionScratch {
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  void keep(int count, const MPI_Request* array) {
    if (requests.size() < static_cast<size_t>(count)) {
      requests.resize(static_cast<size_t>(count));
      statuses.resize(static_cast<size_t>(count));
    }
    // Polls pass one request or a few: a call to memmove would cost more than copying them here.
    MPI_Request* kept = requests.data();
    if (count <= 2) {
      if (count > 0) kept[0] = array[0];
      if (count > 1) kept[1] = array[1];
    } else {
      std::copy(array, array + count, kept);
    }
  }
};
// Reached through a plain pointer: a thread_local with a constructor would
// cost every call a __tls_get_addr for its guard.
[[gnu::tls_model("initial-exec")]] thread_local CompletionScratch* t_scratch = nullptr;
CompletionScratch& completion_scratch() {
  if (CompletionScratch* scratch = t_scratch) return *scratch;
  thread_local CompletionScratch owned;  // freed when the thread exits
  t_scratch = &owned;
  return owned;
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Wait(request, status));
  const MPI_Request handle = *request;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  const int64_t begin = now();
  int rc;
  {
    InProgress shown;
    if (Event waited; waited_operation(Call::kWait, 1, &handle, begin, waited)) shown.show(waited);
    rc = PMPI_Wait(request, kept);
  }
  const int64_t end = now();
  record_call(Call::kWait, begin);
  complete(handle, kept, end);
  end_polling();
  return rc;
}

namespace {

// What a Test does once MPI's returned `rc`: records what completed, shows the polling.
[[gnu::noinline]] int test_answered(MPI_Request handle, const int* flag, MPI_Status* kept, int rc, PollTimer poll) {
  if (poll.finish(*flag)) record_poll(Call::kTest, poll);
  if (*flag) complete(handle, kept, poll.end());
  if (polling_to_show(rc != MPI_SUCCESS || *flag)) show_polled(Call::kTest, 1, &handle);
  return rc;
}

[[gnu::noinline]] int test_polled(MPI_Request* request, int* flag, MPI_Status* status) {
  const MPI_Request handle = *request;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  PollTimer poll;
  const int rc = PMPI_Test(request, flag, kept);
  return test_answered(handle, flag, kept, rc, poll);
}

// What Waitall and Testall do once MPI's returned `rc`: every request completes together, when the call says so.
[[gnu::noinline]] int all_answered(Call call, int count, const MPI_Request handles[], MPI_Status kept[], bool done,
                                   int rc, PollTimer poll) {
  if (poll.finish(done)) record_poll(call, poll);
  if (done) {
    for (int i = 0; i < count; ++i) complete(handles[i], &kept[i], poll.end());
  }
  if (polling_to_show(done || rc != MPI_SUCCESS)) show_polled(call, count, handles);
  return rc;
}

template <typename Run>
int all(Call call, int count, MPI_Request requests[], MPI_Status statuses[], Run&& run) {
  CompletionScratch& scratch = completion_scratch();
  scratch.keep(count, requests);
  MPI_Status* kept = statuses == MPI_STATUSES_IGNORE ? scratch.statuses.data() : statuses;
  PollTimer poll(call == Call::kWaitall ? PollTimer::Timing::kAlways : PollTimer::Timing::kSampled);
  int done = 1;
  int rc;
  {
    InProgress shown;
    if (Event waited; call == Call::kWaitall && waited_operation(call, count, requests, poll.begin(), waited)) {
      shown.show(waited);
    }
    rc = run(kept, &done);
  }
  return all_answered(call, count, scratch.requests.data(), kept, done, rc, poll);
}

// What Waitany, Testany, Waitsome and Testsome do once MPI's returned `rc`:
// the call names the completed indices (`completed` of them; MPI_UNDEFINED:
// none of the requests was active).
[[gnu::noinline]] int some_answered(Call call, int count, const MPI_Request handles[], int completed,
                                    const int indices[], MPI_Status kept[], int rc, PollTimer poll) {
  const bool waits = call == Call::kWaitany || call == Call::kWaitsome;
  const bool done = completed > 0 && completed != MPI_UNDEFINED;
  if (poll.finish(done)) record_poll(call, poll);
  if (done) {
    for (int i = 0; i < completed; ++i) {
      const int index = indices ? indices[i] : completed;
      complete(handles[index], &kept[i], poll.end());
    }
  }
  const bool nothing_active = completed == MPI_UNDEFINED;
  if (polling_to_show(waits || done || nothing_active || rc != MPI_SUCCESS)) show_polled(call, count, handles);
  return rc;
}

// Waitany and Testany as Waitsome and Testsome see them: how many completed.
int any_completed(int flag, int index) { return !flag ? 0 : index == MPI_UNDEFINED ? MPI_UNDEFINED : 1; }

template <typename Run>
int some(Call call, int count, MPI_Request requests[], int* completed, int indices[], MPI_Status statuses[], Run&& run) {
  CompletionScratch& scratch = completion_scratch();
  scratch.keep(count, requests);
  MPI_Status* kept = statuses == MPI_STATUSES_IGNORE ? scratch.statuses.data() : statuses;
  const bool waits = call == Call::kWaitany || call == Call::kWaitsome;
  PollTimer poll(waits ? PollTimer::Timing::kAlways : PollTimer::Timing::kSampled);
  int rc;
  {
    InProgress shown;
    if (Event waited; waits && waited_operation(call, count, requests, poll.begin(), waited)) shown.show(waited);
    rc = run(kept);
  }
  return some_answered(call, count, scratch.requests.data(), *completed, indices, kept, rc, poll);
}

[[gnu::noinline]] int testall_polled(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return all(Call::kTestall, count, requests, statuses, [&](MPI_Status* kept, int* done) {
    const int rc = PMPI_Testall(count, requests, flag, kept);
    *done = *flag;
    return rc;
  });
}

[[gnu::noinline]] int testany_polled(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  int completed = 0;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  return some(Call::kTestany, count, requests, &completed, index, kept, [&](MPI_Status* s) {
    const int rc = PMPI_Testany(count, requests, index, flag, s);
    completed = any_completed(*flag, *index);
    return rc;
  });
}

[[gnu::noinline]] int testsome_polled(int count, MPI_Request requests[], int* outcount, int indices[],
                                        MPI_Status statuses[]) {
  return some(Call::kTestsome, count, requests, outcount, indices, statuses,
              [&](MPI_Status* kept) { return PMPI_Testsome(count, requests, outcount, indices, kept); });
}

// Each poll's capture: a quick poll of one request (mpi_shim.h, "quick
// polls") that MPI answers with nothing returns at once; one it answers goes
// to the `_answered` function, and any other poll to the `_polled` one.
[[gnu::noinline]] int test_captured(MPI_Request* request, int* flag, MPI_Status* status) {
  if (!poll_quickly()) return test_polled(request, flag, status);
  QuickPoll quick(request, status);
  const int rc = PMPI_Test(request, flag, quick.status);
  if (rc == MPI_SUCCESS && !*flag) [[likely]] return rc;
  return test_answered(quick.handle, flag, quick.status, rc, PollTimer::quick_answer());
}

[[gnu::noinline]] int testall_captured(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (count != 1 || !poll_quickly()) return testall_polled(count, requests, flag, statuses);
  QuickPoll quick(requests, statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : statuses);
  const int rc = PMPI_Testall(1, requests, flag, quick.status);
  if (rc == MPI_SUCCESS && !*flag) [[likely]] return rc;
  return all_answered(Call::kTestall, 1, &quick.handle, quick.status, *flag, rc, PollTimer::quick_answer());
}

[[gnu::noinline]] int testany_captured(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (count != 1 || !poll_quickly()) return testany_polled(count, requests, index, flag, status);
  QuickPoll quick(requests, status);
  const int rc = PMPI_Testany(1, requests, index, flag, quick.status);
  if (rc == MPI_SUCCESS && !*flag) [[likely]] return rc;
  return some_answered(Call::kTestany, 1, &quick.handle, any_completed(*flag, *index), index, quick.status, rc,
                       PollTimer::quick_answer());
}

[[gnu::noinline]] int testsome_captured(int count, MPI_Request requests[], int* outcount, int indices[],
                                        MPI_Status statuses[]) {
  if (count != 1 || !poll_quickly()) return testsome_polled(count, requests, outcount, indices, statuses);
  QuickPoll quick(requests, statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : statuses);
  const int rc = PMPI_Testsome(1, requests, outcount, indices, quick.status);
  if (rc == MPI_SUCCESS && *outcount == 0) [[likely]] return rc;
  return some_answered(Call::kTestsome, 1, &quick.handle, *outcount, indices, quick.status, rc,
                       PollTimer::quick_answer());
}

}  // namespace

RANKSCOPE_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  return pass_through_or<PMPI_Test, test_captured>(request, flag, status);
}

RANKSCOPE_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Waitall(count, requests, statuses));
  return all(Call::kWaitall, count, requests, statuses,
             [&](MPI_Status* kept, int*) { return PMPI_Waitall(count, requests, kept); });
}

RANKSCOPE_EXPORT int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return pass_through_or<PMPI_Testall, testall_captured>(count, requests, flag, statuses);
}

RANKSCOPE_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  RANKSCOPE_PASS_THROUGH(PMPI_Waitany(count, requests, index, status));
  int completed = 0;
  MPI_Status own;
  MPI_Status* kept = status == MPI_STATUS_IGNORE ? &own : status;
  return some(Call::kWaitany, count, requests, &completed, index, kept, [&](MPI_Status* s) {
    const int rc = PMPI_Waitany(count, requests, index, s);
    completed = *index == MPI_UNDEFINED ? MPI_UNDEFINED : 1;
    return rc;
  });
}

RANKSCOPE_EXPORT int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  return pass_through_or<PMPI_Testany, testany_captured>(count, requests, index, flag, status);
}

RANKSCOPE_EXPORT int MPI_Waitsome(int count, MPI_Request requests[], int* outcount, int indices[],
                                  MPI_Status statuses[]) {
  RANKSCOPE_PASS_THROUGH(PMPI_Waitsome(count, requests, outcount, indices, statuses));
  return some(Call::kWaitsome, count, requests, outcount, indices, statuses,
              [&](MPI_Status* kept) { return PMPI_Waitsome(count, requests, outcount, indices, kept); });
}

RANKSCOPE_EXPORT int MPI_Testsome(int count, MPI_Request requests[], int* outcount, int indices[],
                                  MPI_Status statuses[]) {
  return pass_through_or<PMPI_Testsome, testsome_captured>(count, requests, outcount, indices, statuses);
}
