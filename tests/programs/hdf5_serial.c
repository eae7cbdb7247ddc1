/* An MPI program that uses Debian's serial HDF5 (libhdf5_serial), as many
   real codes do: every rank writes its own file, then reads its neighbour's.
   rankscope's agent is linked to the parallel HDF5 (libhdf5_openmpi), which
   exports the same symbol names; the program must still get the library it
   was linked with.
   Usage: hdf5_serial [ARG...]; every argument is echoed by rank 0. Writes
   rank-N.h5 in the working directory. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kRows = 64, kCols = 16 };

static void check(int ok, const char *what, int rank) {
  if (!ok) {
    fprintf(stderr, "hdf5_serial: rank %d: %s failed\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

static void write_file(const char *name, const double *data, int rank) {
  hid_t file = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  check(file >= 0, "H5Fcreate", rank);
  const hsize_t dims[2] = {kRows, kCols};
  hid_t space = H5Screate_simple(2, dims, NULL);
  /* No modification times in the file, so two runs write the same bytes. */
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_obj_track_times(dcpl, 0);
  hid_t set = H5Dcreate2(file, "values", H5T_IEEE_F64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  check(set >= 0, "H5Dcreate2", rank);
  check(H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "H5Dwrite", rank);
  hid_t attr_space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(set, "rank", H5T_STD_I32LE, attr_space, H5P_DEFAULT, H5P_DEFAULT);
  check(attr >= 0 && H5Awrite(attr, H5T_NATIVE_INT, &rank) >= 0, "H5Awrite", rank);
  H5Aclose(attr);
  H5Sclose(attr_space);
  H5Dclose(set);
  H5Pclose(dcpl);
  H5Sclose(space);
  check(H5Fclose(file) >= 0, "H5Fclose", rank);
}

static double read_file(const char *name, int expected_rank, int rank) {
  static double data[kRows * kCols];
  hid_t file = H5Fopen(name, H5F_ACC_RDONLY, H5P_DEFAULT);
  check(file >= 0, "H5Fopen", rank);
  hid_t set = H5Dopen2(file, "values", H5P_DEFAULT);
  check(set >= 0, "H5Dopen2", rank);
  check(H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "H5Dread", rank);
  int written_by = -1;
  hid_t attr = H5Aopen(set, "rank", H5P_DEFAULT);
  check(attr >= 0 && H5Aread(attr, H5T_NATIVE_INT, &written_by) >= 0, "H5Aread", rank);
  check(written_by == expected_rank, "the rank attribute", rank);
  H5Aclose(attr);
  H5Dclose(set);
  H5Fclose(file);
  double sum = 0;
  for (int i = 0; i < kRows * kCols; ++i) sum += data[i];
  return sum;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    printf("argc=%d\n", argc - 1);
    for (int i = 1; i < argc; ++i) printf("argv[%d]=<%s>\n", i, argv[i]);
    unsigned major, minor, release;
    H5get_libversion(&major, &minor, &release);
    printf("HDF5 %u.%u.%u\n", major, minor, release);
  }

  /* Rank 0 decides the scale and tells everyone. */
  double scale = rank == 0 ? 0.5 : 0;
  MPI_Bcast(&scale, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  static double data[kRows * kCols];
  for (int i = 0; i < kRows * kCols; ++i) data[i] = scale * (rank + 1) * i;
  char name[64], neighbour[64];
  snprintf(name, sizeof name, "rank-%d.h5", rank);
  write_file(name, data, rank);

  /* Every file is complete before anyone reads; then the sums go round the ring. */
  MPI_Barrier(MPI_COMM_WORLD);
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  snprintf(neighbour, sizeof neighbour, "rank-%d.h5", left);
  const double read_sum = read_file(neighbour, left, rank);
  double from_left = 0;
  MPI_Sendrecv(&read_sum, 1, MPI_DOUBLE, right, 1, &from_left, 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  /* Once more round the ring, each received after a blocking probe, then
     after polling: the counts of MPI_Probe and MPI_Iprobe are checked too. */
  MPI_Request sent;
  MPI_Status status;
  double probed = 0, polled = 0;
  MPI_Isend(&read_sum, 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &sent);
  MPI_Probe(left, 2, MPI_COMM_WORLD, &status);
  MPI_Recv(&probed, 1, MPI_DOUBLE, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&sent, MPI_STATUS_IGNORE);
  MPI_Isend(&read_sum, 1, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &sent);
  for (int arrived = 0; !arrived;) MPI_Iprobe(left, 3, MPI_COMM_WORLD, &arrived, &status);
  MPI_Recv(&polled, 1, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&sent, MPI_STATUS_IGNORE);
  check(probed == from_left && polled == from_left, "the probed messages", rank);

  double total = 0;
  MPI_Allreduce(&read_sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double *sums = rank == 0 ? malloc(sizeof(double) * size) : NULL;
  MPI_Gather(&from_left, 1, MPI_DOUBLE, sums, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r) printf("rank %d received %.1f\n", r, sums[r]);
    printf("total %.1f\n", total);
    free(sums);
  }
  MPI_Finalize();
  return 0;
}
