// Shared by the fault-injection rules and the fault-injecting transport.
#pragma once

#include <infiniband/verbs.h>

#include <memory>

#include "smart/fault_injection.h"
#include "smart/transport.h"

namespace smart::fault_internal {

// Carries out a rule's action (kill, stop, exit, delay; fail is the caller's).
void Perform(const FaultRule& rule);
// Counts a work request of `opcode`; true (and *fire) when a rule fires.
bool HitRequest(int opcode, FaultRule* fire);
// Wraps `inner` so that its queue pairs apply the work-request rules.
std::unique_ptr<Device> WrapDevice(std::unique_ptr<Device> inner);

}  // namespace smart::fault_internal
