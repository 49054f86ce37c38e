// Slurm hostlist expansion: ranges, zero padding, several groups, and malformed input.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "launch/hostlist.hpp"

using dtrain::expand_hostlist;
using V = std::vector<std::string>;

TEST_CASE("hostlists expand like Slurm's", "[hostlist]") {
  CHECK(expand_hostlist("node[01-04,07],gpu-a[1-2]") ==
        V{"node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"});
  CHECK(expand_hostlist("nodea") == V{"nodea"});
  CHECK(expand_hostlist("nodea,nodeb") == V{"nodea", "nodeb"});
  CHECK(expand_hostlist("n[8-11]") == V{"n8", "n9", "n10", "n11"});
  CHECK(expand_hostlist("r[1-2]n[1-2]") == V{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand_hostlist("n[098-101]") == V{"n098", "n099", "n100", "n101"});
}

TEST_CASE("malformed hostlists are user errors", "[hostlist]") {
  for (const char* bad : {"node[1-", "node]1", "node[a-b]", "node[3-1]", "a,,b"})
    CHECK_THROWS_AS(expand_hostlist(bad), dtrain::UserError);
}
