// The entry points of the Python capture source, for rankscope's own hook
// in the interpreter (rank_agent/sources/python/hook/rankscope_hook, loaded through
// PYTHONPATH's sitecustomize), which calls them through ctypes. What the hook
// records and why: docs/pytorch.md. Each is cheap (no lock, no
// allocation, no system call) but for the ones marked "once".
#pragma once

#include <cstdint>

#include "rankscope/rank_agent/agent.h"

// Once, when the hook starts in a process: 1 when this process captures
// Python (the hook then installs itself), 0 when it does not (another
// process of the job, or `--capture` without python).
RANKSCOPE_AGENT_API int rankscope_python_attach();
// Once, when the hook has hooked torch: what it could hook, as the bits of
// counter::PythonTorchHooked (model/counters.h).
RANKSCOPE_AGENT_API void rankscope_python_hooked(uint32_t hooked);
// The event clock, as rankscope_agent_now().
RANKSCOPE_AGENT_API int64_t rankscope_python_now();
// A name's id in the rank's string table (kNoName when it is full).
RANKSCOPE_AGENT_API uint32_t rankscope_python_name(const char* text);
// A number the hook needs, by its name, so that the hook holds no copy of
// the numbers: `type` "op" (CommOp) or "datatype" (DataType) by the names
// the file formats give them (docs/format.md), "capture" (a CaptureBit by
// its name in --capture), "hooked" (a bit of counter::PythonTorchHooked:
// steps, data_loading, phases, collectives); 0 for a name it does not know.
RANKSCOPE_AGENT_API uint32_t rankscope_python_enum(const char* type, const char* name);
// The calling thread's track (for a collective that blocks it).
RANKSCOPE_AGENT_API uint32_t rankscope_python_thread_track();

// A host range on the calling thread, begun at `begin_ns` (negative: now):
// open while it runs (a hang's state shows it, and a ProfilerStep#N steers
// --steps windows). The slot to end it with; -1 when every slot is taken
// (the range is then not recorded, and counted).
RANKSCOPE_AGENT_API int32_t rankscope_python_begin(uint32_t name_id, int64_t begin_ns);
// Ends the range of `slot` now and records it; its end time (0 for a slot
// that holds no range).
RANKSCOPE_AGENT_API int64_t rankscope_python_end(int32_t slot);

// A process group's track (made on first use) and its hash, equal on every
// rank that is a member: from the group's name, which c10d makes the same on
// every member.
RANKSCOPE_AGENT_API uint32_t rankscope_python_group(const char* group_name, const char* description, uint64_t* hash);
// One c10d collective on this rank, from its call at `begin_ns` to its
// completion now (kTorchCollective): `op` and `datatype` as
// rankscope_python_enum gives them, `seq` its number among the group's
// collectives on this rank, `bytes` its size as nccl-tests counts it,
// `root` the root's global rank or -1. Where `completed` is 0 its completion
// was never seen: it ends where it began.
RANKSCOPE_AGENT_API void rankscope_python_collective(uint32_t group_track, uint64_t group_hash, uint32_t name_id,
                                                     uint32_t op, uint64_t seq, uint64_t bytes, uint32_t datatype,
                                                     int32_t root, int64_t begin_ns, int completed);
// A c10d collective on a GPU backend (NCCL) the NCCL capture source does not
// see: its call, from `begin_ns` to now, which enqueued it
// (kNcclCollectiveEnqueue, on the calling thread); its future completes with
// the enqueue, not the transfer.
RANKSCOPE_AGENT_API void rankscope_python_enqueue(uint64_t group_hash, uint32_t name_id, uint32_t op, uint64_t seq,
                                                  uint64_t bytes, uint32_t datatype, int32_t root, int64_t begin_ns);
// The calling thread blocked from `begin_ns` to now until c10d work
// completed (kTorchWait): the collective it waited for, where known (group
// hash 0 otherwise).
RANKSCOPE_AGENT_API void rankscope_python_wait(uint32_t name_id, uint64_t group_hash, uint32_t op, uint64_t seq,
                                               int64_t begin_ns);
// What the hook counted: `counter` one of the python_* counters of
// model/counters.h, added to. Takes the agent's counters' lock: for the
// hook's failures and its rare losses only.
RANKSCOPE_AGENT_API void rankscope_python_count(const char* counter, uint64_t value);
// The time the hook has spent in its own code so far (ns, the whole of it:
// set, not added), for the capture cost.
RANKSCOPE_AGENT_API void rankscope_python_cost(uint64_t hook_ns);
// One line on stderr, as the agent's (once per kind of problem: the hook
// says each once).
RANKSCOPE_AGENT_API void rankscope_python_say(const char* line);
