// What a fuzz target asserts: FuzzCheck(cond, what) aborts, naming what
// went wrong, when a parser broke a promise (a crash or a sanitizer report
// is the other kind of failure). Under libFuzzer the abort saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FuzzCheck(cond, what)                                                        \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "fuzz: %s:%d: %s (%s)\n", __FILE__, __LINE__, what, #cond);    \
      abort();                                                                       \
    }                                                                                \
  } while (0)
