// Collectives on host values over an MPI communicator (the world, a node, a checkpoint's writers): the
// small agreements outside the training step (which rank failed, which signal arrived, how many bytes
// were written, a root's file list), each one checked MPI call. The step's tensors go through
// Communicator instead. Defined for int, unsigned long long, float and double.
#pragma once
#include <string>
#include <utility>

#include "comm/host_comm.hpp"

namespace dtrain {

enum class HostOp { min, max, sum };

void barrier(HostComm comm);
// Every rank gets op over every rank's value.
template <typename T>
T all_reduce(HostComm comm, T value, HostOp op);
// Every rank gets the smallest (op = min) or largest (op = max) value and the lowest rank that holds it.
std::pair<double, int> all_reduce_loc(HostComm comm, double value, HostOp op);
// root's `count` values on every rank.
template <typename T>
void broadcast(HostComm comm, T* values, int count, int root);
// Every rank's `text` becomes root's.
void broadcast_string(HostComm comm, std::string& text, int root = 0);
// root gets every rank's `count` values in rank order (all: size x count, read on root only).
template <typename T>
void gather(HostComm comm, const T* mine, int count, T* all, int root);
// root gets every rank's `count` values in rank order, rank r's at all + offsets[r] (counts and offsets
// are read on root only); root's own values are already in place at all + offsets[root].
template <typename T>
void gather_in_place_on_root(HostComm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root);
// root gets every rank's `count` values in rank order at all + offsets[r] (counts and offsets on root).
template <typename T>
void gatherv(HostComm comm, const T* mine, int count, T* all, const int* counts, const int* offsets, int root);
// out (on root) = the element-wise sum of every rank's `count` values.
template <typename T>
void reduce_sum(HostComm comm, const T* mine, T* out, int count, int root);
// Empties the file an MPI-IO handle holds (collective over the file's ranks): HDF5's parallel driver
// gives its MPI_File through H5Fget_vfd_handle.
void truncate_mpi_file(void* mpi_file_handle);

}  // namespace dtrain
