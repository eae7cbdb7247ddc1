#include "timeline_damage.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "rankscope/model/crc32c.h"
#include "rankscope/model/error.h"
#include "rankscope/timeline/schema.h"

namespace rankscope::testing {
namespace {

using schema::Handle;

struct Value {
  Handle file, dataset, memory_type, file_space, memory_space;
  size_t width = 0;
};

// Selects the one value named by (dataset, row, field) and a memory type of
// exactly its stored type and width.
Value select_value(const std::string& path, const std::string& name, uint64_t row, const std::string& field,
                   bool writable) {
  schema::silence_hdf5_errors();
  Value v;
  v.file = Handle(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!v.file.valid()) throw Error("cannot open " + path);
  v.dataset = Handle(H5Dopen2(v.file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!v.dataset.valid()) throw Error(path + ": no dataset " + name);
  const Handle stored(H5Dget_type(v.dataset), H5Tclose);
  v.file_space = Handle(H5Dget_space(v.dataset), H5Sclose);
  hsize_t start[2] = {row, 0};
  const hsize_t one[2] = {1, 1};
  if (H5Tget_class(stored) == H5T_COMPOUND) {
    const int member = H5Tget_member_index(stored, field.c_str());
    if (member < 0) throw Error(path + ": " + name + " has no field " + field);
    const Handle member_type(H5Tget_member_type(stored, static_cast<unsigned>(member)), H5Tclose);
    const Handle native(H5Tget_native_type(member_type, H5T_DIR_ASCEND), H5Tclose);
    v.width = H5Tget_size(native);
    v.memory_type = Handle(H5Tcreate(H5T_COMPOUND, v.width), H5Tclose);
    H5Tinsert(v.memory_type, field.c_str(), 0, native);
  } else {
    start[1] = std::stoull(field);
    v.memory_type = Handle(H5Tget_native_type(stored, H5T_DIR_ASCEND), H5Tclose);
    v.width = H5Tget_size(v.memory_type);
  }
  if (v.width > 8) throw Error(path + ": " + name + " " + field + " is not a number");
  if (H5Sselect_hyperslab(v.file_space, H5S_SELECT_SET, start, nullptr, one, nullptr) < 0 ||
      H5Sselect_valid(v.file_space) <= 0) {
    throw Error(path + ": " + name + " has no row " + std::to_string(row));
  }
  const hsize_t n = 1;
  v.memory_space = Handle(H5Screate_simple(1, &n, nullptr), H5Sclose);
  return v;
}

// After an edit of /events: the checksum of the edited row's block made to
// match again, as a writer with a bug (or an editor that knows the format) would.
void rechecksum_event_row(const std::string& path, uint64_t row) {
  for (uint64_t r = 0;; ++r) {
    const auto offset = static_cast<uint64_t>(get_timeline_value(path, "/ranks", r, "event_offset"));
    const auto count = static_cast<uint64_t>(get_timeline_value(path, "/ranks", r, "event_count"));
    if (row < offset || row >= offset + count) continue;
    const uint64_t first = offset + (row - offset) / schema::kEventChecksumRows * schema::kEventChecksumRows;
    const uint64_t n = std::min(schema::kEventChecksumRows, offset + count - first);
    std::vector<Event> events(n);
    {
      const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
      const Handle data(H5Dopen2(file, "/events", H5P_DEFAULT), H5Dclose);
      const Handle space(H5Dget_space(data), H5Sclose);
      const hsize_t start = first, extent = n;
      H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, nullptr, &extent, nullptr);
      const Handle memory(H5Screate_simple(1, &extent, nullptr), H5Sclose);
      if (H5Dread(data, schema::event_type(), memory, space, H5P_DEFAULT, events.data()) < 0) {
        throw Error(path + ": cannot read /events");
      }
    }
    const uint64_t index = static_cast<uint64_t>(get_timeline_value(path, "/ranks", r, "checksum_offset")) +
                           (first - offset) / schema::kEventChecksumRows;
    set_timeline_value(path, "/event_checksums", index, "0", crc32c(events.data(), n * sizeof(Event)));
    return;
  }
}

}  // namespace

void set_timeline_value(const std::string& path, const std::string& dataset, uint64_t row, const std::string& field,
                        int64_t value) {
  Value v = select_value(path, dataset, row, field, true);
  unsigned char bytes[8];
  std::memcpy(bytes, &value, 8);  // little-endian: the low bytes first
  if (H5Dwrite(v.dataset, v.memory_type, v.memory_space, v.file_space, H5P_DEFAULT, bytes) < 0) {
    throw Error(path + ": cannot write " + dataset + " " + field);
  }
  const bool checksummed = H5Lexists(v.file, "/event_checksums", H5P_DEFAULT) > 0;
  v = Value{};  // closes the file before the checksum is rewritten
  if (dataset == "/events" && checksummed) rechecksum_event_row(path, row);
}

int64_t get_timeline_value(const std::string& path, const std::string& dataset, uint64_t row,
                           const std::string& field) {
  Value v = select_value(path, dataset, row, field, false);
  unsigned char bytes[8] = {};
  if (H5Dread(v.dataset, v.memory_type, v.memory_space, v.file_space, H5P_DEFAULT, bytes) < 0) {
    throw Error(path + ": cannot read " + dataset + " " + field);
  }
  int64_t value = 0;
  std::memcpy(&value, bytes, 8);
  const unsigned shift = 64 - 8 * static_cast<unsigned>(v.width);
  return shift == 0 ? value : static_cast<int64_t>(static_cast<uint64_t>(value) << shift) >> shift;
}

void unlink_timeline_dataset(const std::string& path, const std::string& dataset) {
  schema::silence_hdf5_errors();
  const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file.valid() || H5Ldelete(file, dataset.c_str(), H5P_DEFAULT) < 0) {
    throw Error(path + ": cannot remove " + dataset);
  }
}

void flip_timeline_byte(const std::string& path, const std::string& dataset, uint64_t row, uint64_t byte) {
  haddr_t address = HADDR_UNDEF;
  {
    schema::silence_hdf5_errors();
    const Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    const Handle data(H5Dopen2(file, dataset.c_str(), H5P_DEFAULT), H5Dclose);
    if (!data.valid()) throw Error(path + ": no dataset " + dataset);
    const Handle space(H5Dget_space(data), H5Sclose);
    const Handle type(H5Dget_type(data), H5Tclose);
    hsize_t dims[2] = {0, 1};
    H5Sget_simple_extent_dims(space, dims, nullptr);
    const uint64_t row_bytes = H5Tget_size(type) * dims[1];
    if (row >= dims[0] || byte >= row_bytes) throw Error(path + ": " + dataset + " has no such byte");
    const Handle creation(H5Dget_create_plist(data), H5Pclose);
    if (H5Pget_layout(creation) == H5D_CHUNKED) {
      hsize_t chunk[2] = {0, 0}, offset[2] = {0, 0};
      H5Pget_chunk(creation, 2, chunk);
      unsigned filters = 0;
      hsize_t size = 0;
      if (H5Dget_chunk_info(data, space, row / chunk[0], offset, &filters, &address, &size) < 0) {
        throw Error(path + ": " + dataset + " has no stored chunk for row " + std::to_string(row));
      }
      address += (row % chunk[0]) * row_bytes + byte;
    } else {
      address = H5Dget_offset(data) + row * row_bytes + byte;
    }
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  unsigned char b = 0;
  const auto at = static_cast<off_t>(address);
  const bool done = fd >= 0 && ::pread(fd, &b, 1, at) == 1 && (b ^= 0xff, ::pwrite(fd, &b, 1, at) == 1);
  if (fd >= 0) ::close(fd);
  if (!done) throw Error("cannot flip a byte of " + path);
}

}  // namespace rankscope::testing
