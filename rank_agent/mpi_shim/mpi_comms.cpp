// What the handles a call passes say of it: its communicator's identity (the
// same on every member, however the communicator was made) and its data's
// type and size.
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "mpi_shim.h"
#include "rankscope/model/hash.h"

namespace rankscope::agent {

CommInfo* g_world = nullptr;
int g_world_rank = 0;
std::atomic<uint64_t> g_comms_deleted{0};
[[gnu::tls_model("initial-exec")]] constinit thread_local LastCommLookup t_last_comm{};

namespace {

int g_keyval = MPI_KEYVAL_INVALID;
MPI_Group g_world_group = MPI_GROUP_NULL;

int delete_comm_info(MPI_Comm, int, void* value, void*) {
  g_comms_deleted.fetch_add(1, std::memory_order_relaxed);
  delete static_cast<CommInfo*>(value);
  return MPI_SUCCESS;
}

}  // namespace

void set_up_comms() {
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  PMPI_Comm_group(MPI_COMM_WORLD, &g_world_group);
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm_info, &g_keyval, nullptr);
  std::vector<int> world_ranks;
  membership(MPI_COMM_WORLD, world_ranks);
  g_world = register_comm(MPI_COMM_WORLD, mix64(0x776f726c64ull), std::move(world_ranks));
}

void tear_down_comms() { PMPI_Group_free(&g_world_group); }

uint64_t membership(MPI_Comm comm, std::vector<int>& world_ranks) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  MPI_Group group;
  if (inter) PMPI_Comm_remote_group(comm, &group);
  else PMPI_Comm_group(comm, &group);
  int size = 0;
  PMPI_Group_size(group, &size);
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) ranks[static_cast<size_t>(i)] = i;
  world_ranks.assign(static_cast<size_t>(size), kNoPeer);
  PMPI_Group_translate_ranks(group, size, ranks.data(), g_world_group, world_ranks.data());
  PMPI_Group_free(&group);
  return hash_bytes(reinterpret_cast<const char*>(world_ranks.data()), world_ranks.size() * sizeof(int));
}

CommInfo* register_comm(MPI_Comm comm, uint64_t hash, std::vector<int> world_ranks) {
  auto* info = new CommInfo();
  info->hash = hash;
  info->world_ranks = std::move(world_ranks);
  const std::string name = comm == MPI_COMM_WORLD ? std::string("MPI_COMM_WORLD")
                                                  : "MPI comm " + std::to_string(hash & 0xFFFFFF) + " (" +
                                                        std::to_string(info->world_ranks.size()) + " ranks)";
  info->track = rankscope_agent_track(TrackType::kMpiComm, hash, -1, name.c_str());
  if (comm != MPI_COMM_WORLD) PMPI_Comm_set_attr(comm, g_keyval, info);
  return info;
}

// Communicators the shim did not see made (from calls it does not wrap) are
// known by their members: equal on every member, shared by communicators
// with the same members.
CommInfo* look_up_comm(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
  if (found) return static_cast<CommInfo*>(value);
  // Once per communicator; two threads meeting a new one together must not
  // both register it (the second registration would free the first's).
  static std::mutex registering;
  std::lock_guard lock(registering);
  PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
  if (found) return static_cast<CommInfo*>(value);
  std::vector<int> world_ranks;
  const uint64_t hash = membership(comm, world_ranks);
  return register_comm(comm, mix64(hash), std::move(world_ranks));
}

// A communicator made from `parent`: its identity mixes the parent's, how
// many the parent had made before (the same on every rank, as creation is
// collective), and its members (which tell apart the pieces of one split).
void note_new_comm(MPI_Comm parent, MPI_Comm made, uint64_t discriminator) {
  CommInfo* parent_info = info_for(parent);
  const uint64_t ordinal = parent_info->children.fetch_add(1, std::memory_order_relaxed);
  if (made == MPI_COMM_NULL) return;
  std::vector<int> world_ranks;
  const uint64_t members = membership(made, world_ranks);
  register_comm(made, mix64(parent_info->hash ^ mix64(ordinal * 0x9E3779B97F4A7C15ull + discriminator) ^ members),
                std::move(world_ranks));
}

// ---------------------------------------------------------- datatypes ---

DataType data_type_of(MPI_Datatype type) {
  if (type == MPI_FLOAT) return DataType::kFloat32;
  if (type == MPI_DOUBLE) return DataType::kFloat64;
  if (type == MPI_INT || type == MPI_INT32_T) return DataType::kInt32;
  if (type == MPI_UNSIGNED || type == MPI_UINT32_T) return DataType::kUint32;
  if (type == MPI_LONG || type == MPI_LONG_LONG || type == MPI_INT64_T) return DataType::kInt64;
  if (type == MPI_UNSIGNED_LONG || type == MPI_UNSIGNED_LONG_LONG || type == MPI_UINT64_T) return DataType::kUint64;
  if (type == MPI_CHAR || type == MPI_SIGNED_CHAR || type == MPI_INT8_T) return DataType::kInt8;
  if (type == MPI_BYTE || type == MPI_UNSIGNED_CHAR || type == MPI_UINT8_T) return DataType::kUint8;
  return DataType::kOther;
}

uint64_t total_bytes(const int counts[], MPI_Comm comm, MPI_Datatype type) {
  int size = 0;
  PMPI_Comm_size(comm, &size);
  int64_t total = 0;
  for (int i = 0; i < size; ++i) total += counts[i];
  return bytes_of(1, type) * static_cast<uint64_t>(total);
}

}  // namespace rankscope::agent
