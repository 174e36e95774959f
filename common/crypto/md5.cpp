#include "common/crypto/md5.h"

#include <utility>

#include <openssl/evp.h>

#include "common/status.h"

namespace apus::common::crypto {
namespace {

// Fetching an algorithm walks the provider tables under a lock; doing it once keeps every
// later init a plain pointer hand-off. The object is never freed (process lifetime).
const EVP_MD* md5_algorithm() {
  static const EVP_MD* const md = EVP_MD_fetch(nullptr, "MD5", nullptr);
  APUS_CHECK(md != nullptr);
  return md;
}

EVP_MD_CTX* new_initialized_ctx() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  APUS_CHECK(ctx != nullptr);
  APUS_CHECK(EVP_DigestInit_ex2(ctx, md5_algorithm(), nullptr) == 1);
  return ctx;
}

// A per-thread context used to finish a copy of a live state (digest() const) and by the
// one-shot helpers, so neither allocates a context per call.
struct ScratchCtx {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ScratchCtx() { APUS_CHECK(ctx != nullptr); }
  ~ScratchCtx() { EVP_MD_CTX_free(ctx); }
};

EVP_MD_CTX* scratch_ctx() {
  thread_local ScratchCtx scratch;
  return scratch.ctx;
}

constexpr char kHexDigits[] = "0123456789abcdef";

}  // namespace

Md5::Md5() : ctx_(new_initialized_ctx()) {}

Md5::~Md5() { EVP_MD_CTX_free(ctx_); }

Md5::Md5(Md5&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

Md5& Md5::operator=(Md5&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_);
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

void Md5::update(std::span<const uint8_t> data) {
  if (data.empty()) return;
  APUS_CHECK(EVP_DigestUpdate(ctx_, data.data(), data.size()) == 1);
}

void Md5::update(std::string_view data) {
  if (data.empty()) return;
  APUS_CHECK(EVP_DigestUpdate(ctx_, data.data(), data.size()) == 1);
}

Md5Digest Md5::digest() const {
  // Finishing consumes a context, so finish a copy and keep ours running.
  EVP_MD_CTX* copy = scratch_ctx();
  APUS_CHECK(EVP_MD_CTX_copy_ex(copy, ctx_) == 1);
  Md5Digest out;
  unsigned int len = 0;
  APUS_CHECK(EVP_DigestFinal_ex(copy, out.data(), &len) == 1 && len == out.size());
  return out;
}

std::string Md5::hex_digest() const { return to_hex(digest()); }

void Md5::reset() { APUS_CHECK(EVP_DigestInit_ex2(ctx_, md5_algorithm(), nullptr) == 1); }

Md5Digest md5(std::string_view data) {
  EVP_MD_CTX* ctx = scratch_ctx();
  APUS_CHECK(EVP_DigestInit_ex2(ctx, md5_algorithm(), nullptr) == 1);
  APUS_CHECK(EVP_DigestUpdate(ctx, data.data(), data.size()) == 1);
  Md5Digest out;
  unsigned int len = 0;
  APUS_CHECK(EVP_DigestFinal_ex(ctx, out.data(), &len) == 1 && len == out.size());
  return out;
}

std::string md5_hex(std::string_view data) { return to_hex(md5(data)); }

std::string to_hex(const Md5Digest& digest) {
  std::string out(digest.size() * 2, '\0');
  write_hex(digest, out.data());
  return out;
}

void write_hex(std::span<const uint8_t> bytes, char* out) {
  for (uint8_t b : bytes) {
    *out++ = kHexDigits[b >> 4];
    *out++ = kHexDigits[b & 0x0f];
  }
}

}  // namespace apus::common::crypto
