// The host-value collectives of host_values.hpp: one checked MPI call each.
#include "comm/host_values.hpp"

#include "common/error.hpp"

namespace dtrain {
namespace {

template <typename T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<int>() {
  return MPI_INT;
}
template <>
MPI_Datatype mpi_type<unsigned long long>() {
  return MPI_UNSIGNED_LONG_LONG;
}
template <>
MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}

MPI_Op mpi_op(HostOp op) {
  switch (op) {
    case HostOp::min:
      return MPI_MIN;
    case HostOp::max:
      return MPI_MAX;
    case HostOp::sum:
      break;
  }
  return MPI_SUM;
}

}  // namespace

int comm_rank(MPI_Comm comm) {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &r));
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 1;
  MPI_CHECK(MPI_Comm_size(comm, &s));
  return s;
}

void barrier(MPI_Comm comm) { MPI_CHECK(MPI_Barrier(comm)); }

template <typename T>
T all_reduce(MPI_Comm comm, T value, HostOp op) {
  T out{};
  MPI_CHECK(MPI_Allreduce(&value, &out, 1, mpi_type<T>(), mpi_op(op), comm));
  return out;
}

std::pair<double, int> all_max_loc(MPI_Comm comm, double value) {
  struct {
    double value;
    int rank;
  } mine{value, comm_rank(comm)}, best{0.0, 0};
  MPI_CHECK(MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm));
  return {best.value, best.rank};
}

template <typename T>
void broadcast(MPI_Comm comm, T* values, int count, int root) {
  MPI_CHECK(MPI_Bcast(values, count, mpi_type<T>(), root, comm));
}

void broadcast_string(MPI_Comm comm, std::string& text, int root) {
  long len = static_cast<long>(text.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG, root, comm));
  text.resize(static_cast<std::size_t>(len));
  MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(len), MPI_CHAR, root, comm));
}

template <typename T>
void gather(MPI_Comm comm, const T* mine, int count, T* all, int root) {
  MPI_CHECK(MPI_Gather(mine, count, mpi_type<T>(), all, count, mpi_type<T>(), root, comm));
}

template <typename T>
void gather_in_place_on_root(MPI_Comm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root) {
  const bool on_root = comm_rank(comm) == root;
  MPI_CHECK(MPI_Gatherv(on_root ? MPI_IN_PLACE : mine, count, mpi_type<T>(), all, counts, offsets, mpi_type<T>(), root, comm));
}

template <typename T>
void gatherv(MPI_Comm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root) {
  MPI_CHECK(MPI_Gatherv(mine, count, mpi_type<T>(), all, counts, offsets, mpi_type<T>(), root, comm));
}

template <typename T>
void reduce_sum(MPI_Comm comm, const T* mine, T* out, int count, int root) {
  MPI_CHECK(MPI_Reduce(mine, out, count, mpi_type<T>(), MPI_SUM, root, comm));
}

void truncate_mpi_file(void* mpi_file_handle) { MPI_File_set_size(*static_cast<MPI_File*>(mpi_file_handle), 0); }

template int all_reduce(MPI_Comm, int, HostOp);
template unsigned long long all_reduce(MPI_Comm, unsigned long long, HostOp);
template double all_reduce(MPI_Comm, double, HostOp);
template void broadcast(MPI_Comm, int*, int, int);
template void broadcast(MPI_Comm, unsigned long long*, int, int);
template void broadcast(MPI_Comm, double*, int, int);
template void gather(MPI_Comm, const int*, int, int*, int);
template void gather(MPI_Comm, const unsigned long long*, int, unsigned long long*, int);
template void gather_in_place_on_root(MPI_Comm, const float*, int, float*, const int*, const int*, int);
template void gatherv(MPI_Comm, const int*, int, int*, const int*, const int*, int);
template void reduce_sum(MPI_Comm, const unsigned long long*, unsigned long long*, int, int);

}  // namespace dtrain
