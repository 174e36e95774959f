#include "common/crypto/aes_ctr.h"

#include <openssl/evp.h>

#include <array>
#include <climits>

#include "common/assert.h"

namespace apus::common::crypto {

namespace {

// The counter block `offset_blocks` blocks after `iv`, big-endian, wrapping at 2^128.
std::array<unsigned char, kAesIvBytes> advance(std::string_view iv, uint64_t offset_blocks) {
  std::array<unsigned char, kAesIvBytes> block;
  for (size_t i = 0; i < kAesIvBytes; ++i) block[i] = static_cast<unsigned char>(iv[i]);
  uint64_t carry = offset_blocks;
  for (size_t i = kAesIvBytes; i-- > 0 && carry != 0;) {
    uint64_t sum = block[i] + (carry & 0xff);
    block[i] = static_cast<unsigned char>(sum);
    carry = (carry >> 8) + (sum >> 8);
  }
  return block;
}

}  // namespace

AesCtr::AesCtr(std::string_view key, std::string_view iv, uint64_t offset)
    : ctx_(EVP_CIPHER_CTX_new()) {
  APUS_CHECK(ctx_ != nullptr);
  APUS_CHECK(key.size() == kAesKeyBytes && iv.size() == kAesIvBytes);
  std::array<unsigned char, kAesIvBytes> counter = advance(iv, offset / kAesIvBytes);
  APUS_CHECK(EVP_EncryptInit_ex(ctx_, EVP_aes_256_ctr(), nullptr,
                                reinterpret_cast<const unsigned char*>(key.data()),
                                counter.data()) == 1);
  // Within the first block: use up the key stream before the offset.
  std::array<char, kAesIvBytes> skip{};
  apply(std::string_view(skip.data(), offset % kAesIvBytes), skip.data());
}

AesCtr::~AesCtr() { EVP_CIPHER_CTX_free(ctx_); }

void AesCtr::apply(std::string_view in, char* out) {
  // EVP takes an int length: feed huge inputs in pieces.
  constexpr size_t kMaxPiece = size_t{1} << 30;
  for (size_t done = 0; done < in.size();) {
    size_t piece = std::min(in.size() - done, kMaxPiece);
    int written = 0;
    APUS_CHECK(EVP_EncryptUpdate(ctx_, reinterpret_cast<unsigned char*>(out + done), &written,
                                 reinterpret_cast<const unsigned char*>(in.data() + done),
                                 static_cast<int>(piece)) == 1);
    done += piece;
  }
}

std::string AesCtr::apply(std::string_view in) {
  std::string out(in.size(), '\0');
  apply(in, out.data());
  return out;
}

std::string aes_ctr(std::string_view key, std::string_view iv, std::string_view data) {
  AesCtr stream(key, iv);
  return stream.apply(data);
}

}  // namespace apus::common::crypto
