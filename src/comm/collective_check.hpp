// Running a step that may fail on some ranks only (a file missing on one node, bad data): every rank
// runs it, the ranks agree on the outcome, and if any failed, every rank raises the same UserError
// carrying the message of the lowest failing rank. No rank is left waiting in a collective.
#pragma once
#include <functional>

#include "comm/host_comm.hpp"

namespace dtrain {

// Runs `step`; a UserError thrown by it on any rank is rethrown on every rank (prefixed "rank R: ").
void collective_check(HostComm comm, const std::function<void()>& step);

}  // namespace dtrain
