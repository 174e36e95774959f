// Strict UTF-8, as Python's decoder reads it: shortest forms only, no UTF-16 surrogates
// (U+D800..U+DFFF), nothing above U+10FFFF. Swift decodes names, form fields and query values
// this way, so Apus must accept and refuse exactly the same bytes.
//
// Thread-safe: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace apus::common {

// The sequence starting at s[i] (REQUIRES: i < s.size()): its length (1 to 4) when it is well
// formed; else minus the length of the maximal ill-formed subsequence there (at least 1), the
// bytes one U+FFFD replaces in bytes.decode("utf-8", "replace").
int utf8_sequence(std::string_view s, size_t i);

// Every sequence of `s` well formed (an empty string is).
bool valid_utf8(std::string_view s);

// bytes.decode("utf-8", "replace") encoded again: each maximal ill-formed subsequence becomes
// one U+FFFD.
std::string utf8_replace(std::string_view s);

// The next string in code-point order after `s`'s last character, on UTF-8 bytes (Python's
// s[:-1] + chr(ord(s[-1]) + 1)): the first string above every one that starts with `s`. The
// last code point is stepped as bytes, so U+10FFFF and U+D7FF step to byte sequences UTF-8
// does not allow, which still sort above what they must. REQUIRES: !s.empty().
std::string increment_last_char(std::string_view s);

}  // namespace apus::common
