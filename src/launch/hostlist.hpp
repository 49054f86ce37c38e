// Slurm hostlist expressions: "node[01-04,07],gpu-a[1-2]" -> node01 node02 node03 node04 node07 gpu-a1 gpu-a2.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// Expands a hostlist; zero padding of ranges is kept. Throws UserError on a malformed expression.
std::vector<std::string> expand_hostlist(const std::string& expression);

}  // namespace dtrain
