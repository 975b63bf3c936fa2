// Turns a fault on a task stack's guard page into a message that names the
// overflow, instead of a bare segmentation fault.
#pragma once

#include <cstddef>

namespace smart {

void RegisterGuardPage(void* guard, size_t guard_size, size_t stack_size);
void UnregisterGuardPage(void* guard);
// Installs the SIGSEGV handler (once per process) and an alternate signal
// stack for the calling thread, so the handler can run after an overflow.
void EnsureAltStackForThisThread();

}  // namespace smart
