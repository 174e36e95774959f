// APUS_ASSERT: a debug-only check of an invariant (house style: broken invariants crash).
//
// In debug builds (the sanitizer builds, where NDEBUG is not defined) it is APUS_CHECK: log and
// abort. In release builds it compiles to nothing and `cond` is not evaluated, so it may be
// costly (a thread check on every call). Use APUS_CHECK for what must hold in production too.
#pragma once

#include "common/status.h"

#ifdef NDEBUG
#define APUS_ASSERT(cond) \
  do {                    \
  } while (false && (cond))
#else
#define APUS_ASSERT(cond) APUS_CHECK(cond)
#endif
