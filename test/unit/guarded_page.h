// A SMART-BT page image with a guard behind it, for tests that run the page
// parsers on made-up images: a write past the image shows in the guard.
#pragma once

#include <cstring>

#include "page.h"

namespace smart::btree {

struct alignas(64) GuardedPage {
  char page[kPageSize];
  char guard[kPageSize];
  void Arm() { memset(guard, 0xa5, sizeof(guard)); }
  bool GuardIntact() const {
    for (char c : guard) {
      if (static_cast<unsigned char>(c) != 0xa5) return false;
    }
    return true;
  }
};

}  // namespace smart::btree
