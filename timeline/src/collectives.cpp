#include "rankscope/timeline/collectives.h"

#include <cstddef>

#include "rankscope/model/error.h"
#include "rankscope/timeline/schema.h"

namespace rankscope {
namespace {

using schema::Handle;

template <typename Row>
void write_table(hid_t group, const char* name, hid_t type, const std::vector<Row>& rows, const std::string& where) {
  if (H5Lexists(group, name, H5P_DEFAULT) > 0 && H5Ldelete(group, name, H5P_DEFAULT) < 0) {
    throw Error(where + ": cannot replace /collectives/" + name);
  }
  const hsize_t count = rows.size();
  const Handle space(H5Screate_simple(1, &count, nullptr), H5Sclose);
  const Handle dataset(H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (!dataset.valid() || (count > 0 && H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0)) {
    throw Error(where + ": cannot write /collectives/" + name);
  }
}

}  // namespace

void write_collectives(const std::string& timeline_path, const std::vector<CollectiveRow>& instances,
                       const std::vector<ParticipantRow>& participants) {
  schema::silence_hdf5_errors();
  const Handle file(H5Fopen(timeline_path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) throw Error(timeline_path + ": cannot open the timeline for writing its collectives table");
  Handle group(H5Lexists(file, "collectives", H5P_DEFAULT) > 0
                   ? H5Gopen2(file, "collectives", H5P_DEFAULT)
                   : H5Gcreate2(file, "collectives", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Gclose);
  if (!group.valid()) throw Error(timeline_path + ": cannot create /collectives");
  write_table(group, "instances", schema::collective_row_type(), instances, timeline_path);
  write_table(group, "participants", schema::participant_row_type(), participants, timeline_path);
}

}  // namespace rankscope
