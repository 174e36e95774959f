// Unpredictable random bytes for secrets: auth tokens, transaction ids, anything an attacker
// must not guess from what the server has already shown.
//
// Every byte comes from the kernel's CSPRNG through getrandom(2) (blocking only until the
// kernel pool is first initialized, early in boot). There is no user-space generator and no
// seed to recover: a general-purpose engine such as std::mt19937_64 is not fit for secrets,
// because its state follows from a few hundred outputs (or from a 32-bit seed, brute-forced).
// Use <random> engines only for load spreading, shuffles and test data. The one exception to
// "straight from the kernel" is request_random_bytes, which keeps up to 256 of the kernel's
// bytes per thread for values made per request (below).
//
// Failure policy: the kernel call fails only when the system cannot provide randomness at all
// (ENOSYS on an ancient kernel, a seccomp filter); a server that cannot make secrets must not
// run, so that aborts (APUS_CHECK) rather than returning a Status callers could ignore.
//
// Thread-safety: every function is thread-safe. The test seam is process-wide and meant to be
// set while no other thread draws random bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <sys/types.h>

namespace apus::common::crypto {

// Fills `out` with random bytes. Retries on EINTR and short reads until every byte is filled.
void random_bytes(std::span<uint8_t> out);

// `bytes` random bytes as 2 * `bytes` lower-case hex digits.
std::string random_hex(size_t bytes);

// The kernel's random bytes for values made per request and shown to clients (transaction ids,
// MIME boundaries), drawn 256 at a time per thread: one getrandom(2) per 16 transaction ids
// instead of one each. Each byte is handed out once. A child of fork() draws afresh (its
// copy of the parent's unused bytes is discarded), and so does every thread after
// set_getrandom_for_test. Unused bytes wait in the thread's memory, so long-lived secrets
// (tokens, keys) take random_bytes instead.
void request_random_bytes(std::span<uint8_t> out);

// request_random_bytes as 2 * `bytes` lower-case hex digits.
std::string request_random_hex(size_t bytes);

// Python's uuid.uuid4().hex: 32 lower-case hex digits holding 122 random bits, with the RFC
// 4122 version nibble '4' at index 12 and the variant (one of 8, 9, a, b) at index 16. Swift
// builds tempauth tokens and transaction ids from it.
std::string uuid4_hex();
// uuid4_hex from request_random_bytes.
std::string request_uuid4_hex();

// Test seam: replaces getrandom(2) with `fn` (same contract: fill up to `len` bytes of `buf`,
// return how many, or -1 with errno set) so tests can script EINTR, short reads and fixed
// bytes. nullptr restores the kernel call.
using GetrandomFn = ssize_t (*)(void* buf, size_t len, unsigned flags);
void set_getrandom_for_test(GetrandomFn fn);

}  // namespace apus::common::crypto
