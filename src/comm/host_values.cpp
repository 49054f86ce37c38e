// The host-value collectives of host_values.hpp: one checked nonblocking MPI call each, waited for by
// mpi_blocking (comm/mpi_wait.hpp).
#include "comm/host_values.hpp"

#include "comm/mpi_wait.hpp"
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

void barrier(HostComm comm) {
  mpi_blocking([&](MPI_Request* r) { MPI_CHECK(MPI_Ibarrier(comm.mpi(), r)); });
}

template <typename T>
T all_reduce(HostComm comm, T value, HostOp op) {
  T out{};
  mpi_blocking([&](MPI_Request* r) { MPI_CHECK(MPI_Iallreduce(&value, &out, 1, mpi_type<T>(), mpi_op(op), comm.mpi(), r)); });
  return out;
}

std::pair<double, int> all_reduce_loc(HostComm comm, double value, HostOp op) {
  if (op == HostOp::sum) fatal("all_reduce_loc takes min or max, not sum");
  struct {
    double value;
    int rank;
  } mine{value, comm.rank()}, best{0.0, 0};
  mpi_blocking([&](MPI_Request* r) {
    MPI_CHECK(MPI_Iallreduce(&mine, &best, 1, MPI_DOUBLE_INT, op == HostOp::min ? MPI_MINLOC : MPI_MAXLOC, comm.mpi(), r));
  });
  return {best.value, best.rank};
}

template <typename T>
void broadcast(HostComm comm, T* values, int count, int root) {
  mpi_blocking([&](MPI_Request* r) { MPI_CHECK(MPI_Ibcast(values, count, mpi_type<T>(), root, comm.mpi(), r)); });
}

void broadcast_string(HostComm comm, std::string& text, int root) {
  long len = static_cast<long>(text.size());
  mpi_blocking([&](MPI_Request* r) { MPI_CHECK(MPI_Ibcast(&len, 1, MPI_LONG, root, comm.mpi(), r)); });
  text.resize(static_cast<std::size_t>(len));
  mpi_blocking([&](MPI_Request* r) { MPI_CHECK(MPI_Ibcast(text.data(), static_cast<int>(len), MPI_CHAR, root, comm.mpi(), r)); });
}

template <typename T>
void gather(HostComm comm, const T* mine, int count, T* all, int root) {
  mpi_blocking([&](MPI_Request* r) {
    MPI_CHECK(MPI_Igather(mine, count, mpi_type<T>(), all, count, mpi_type<T>(), root, comm.mpi(), r));
  });
}

template <typename T>
void gather_in_place_on_root(HostComm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root) {
  const bool on_root = comm.rank() == root;
  mpi_blocking([&](MPI_Request* r) {
    MPI_CHECK(MPI_Igatherv(on_root ? MPI_IN_PLACE : mine, count, mpi_type<T>(), all, counts, offsets, mpi_type<T>(), root, comm.mpi(), r));
  });
}

template <typename T>
void gatherv(HostComm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root) {
  mpi_blocking([&](MPI_Request* r) {
    MPI_CHECK(MPI_Igatherv(mine, count, mpi_type<T>(), all, counts, offsets, mpi_type<T>(), root, comm.mpi(), r));
  });
}

template <typename T>
void reduce_sum(HostComm comm, const T* mine, T* out, int count, int root) {
  mpi_blocking([&](MPI_Request* r) { MPI_CHECK(MPI_Ireduce(mine, out, count, mpi_type<T>(), MPI_SUM, root, comm.mpi(), r)); });
}

void truncate_mpi_file(void* mpi_file_handle) { MPI_File_set_size(*static_cast<MPI_File*>(mpi_file_handle), 0); }

template int all_reduce(HostComm, int, HostOp);
template unsigned long long all_reduce(HostComm, unsigned long long, HostOp);
template double all_reduce(HostComm, double, HostOp);
template void broadcast(HostComm, int*, int, int);
template void broadcast(HostComm, unsigned long long*, int, int);
template void broadcast(HostComm, double*, int, int);
template void gather(HostComm, const int*, int, int*, int);
template void gather(HostComm, const unsigned long long*, int, unsigned long long*, int);
template void gather_in_place_on_root(HostComm, const float*, int, float*, const int*, const int*, int);
template void gatherv(HostComm, const int*, int, int*, const int*, const int*, int);
template void reduce_sum(HostComm, const unsigned long long*, unsigned long long*, int, int);

}  // namespace dtrain
