// Collectives on host values over an MPI communicator (the world, a node, a checkpoint's writers): the
// small agreements outside the training step (which rank failed, which signal arrived, how many bytes
// were written, a root's file list), each one checked MPI call. The step's tensors go through
// Communicator instead. Defined for int, unsigned long long, float and double.
#pragma once
#include <mpi.h>

#include <string>
#include <utility>

namespace dtrain {

enum class HostOp { min, max, sum };

int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);
void barrier(MPI_Comm comm);
// Every rank gets op over every rank's value.
template <typename T>
T all_reduce(MPI_Comm comm, T value, HostOp op);
// Every rank gets the largest value and the lowest rank that holds it.
std::pair<double, int> all_max_loc(MPI_Comm comm, double value);
// root's `count` values on every rank.
template <typename T>
void broadcast(MPI_Comm comm, T* values, int count, int root);
// Every rank's `text` becomes root's.
void broadcast_string(MPI_Comm comm, std::string& text, int root = 0);
// root gets every rank's `count` values in rank order (all: size x count, read on root only).
template <typename T>
void gather(MPI_Comm comm, const T* mine, int count, T* all, int root);
// root gets every rank's `count` values in rank order, rank r's at all + offsets[r] (counts and offsets
// are read on root only); root's own values are already in place at all + offsets[root].
template <typename T>
void gather_in_place_on_root(MPI_Comm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root);
// root gets every rank's `count` values in rank order at all + offsets[r] (counts and offsets on root).
template <typename T>
void gatherv(MPI_Comm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root);
// out (on root) = the element-wise sum of every rank's `count` values.
template <typename T>
void reduce_sum(MPI_Comm comm, const T* mine, T* out, int count, int root);
// Empties the file an MPI-IO handle holds (collective over the file's ranks): HDF5's parallel driver
// gives its MPI_File through H5Fget_vfd_handle.
void truncate_mpi_file(void* mpi_file_handle);

}  // namespace dtrain
