#include "common/json_bytes.hpp"

#include <openssl/evp.h>

#include "common/error.hpp"

namespace hvrun {

namespace {

const std::string kMark(1, '\0');

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string unbase64(const std::string& text, const std::string& peer) {
  // EVP_DecodeBlock takes whole 4-character groups and counts the '=' padding as zero bytes.
  if (text.size() % 4 != 0)
    throw ProtocolError(peer + ": malformed bytes field (base64 length " + std::to_string(text.size()) + ")");
  std::string out(3 * (text.size() / 4) + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) throw ProtocolError(peer + ": malformed bytes field (not base64)");
  std::size_t size = static_cast<std::size_t>(n);
  for (std::size_t i = text.size(); i > 0 && text[i - 1] == '=' && size > 0; --i) --size;
  out.resize(size);
  return out;
}

// Whether nlohmann can write `s` as a JSON string: it refuses invalid UTF-8 (type_error 316).
bool is_text(const std::string& s) {
  if (!s.empty() && s[0] == '\0') return false;
  for (const unsigned char c : s)
    if (c >= 0x80) {
      try {
        (void)nlohmann::json(s).dump();
        return true;
      } catch (const nlohmann::json::type_error&) {
        return false;
      }
    }
  return true;
}

nlohmann::json to_bytes_safe(const nlohmann::json& j) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (is_text(s)) return j;
    return nlohmann::json::object({{kMark, base64(s)}});
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : j) out.push_back(to_bytes_safe(e));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : j.items()) out[is_text(k) ? k : kMark + base64(k)] = to_bytes_safe(v);
    return out;
  }
  return j;
}

}  // namespace

std::string dump_bytes_safe(const nlohmann::json& j) {
  try {
    return j.dump();
  } catch (const nlohmann::json::type_error&) {
    return to_bytes_safe(j).dump();  // some string is not UTF-8: only then walk the message
  }
}

void restore_bytes(nlohmann::json& j, const std::string& peer) {
  if (j.is_array()) {
    for (auto& e : j) restore_bytes(e, peer);
    return;
  }
  if (!j.is_object()) return;
  if (j.size() == 1 && j.begin().key() == kMark) {
    if (!j.begin().value().is_string()) throw ProtocolError(peer + ": malformed bytes field (not a string)");
    j = unbase64(j.begin().value().get<std::string>(), peer);
    return;
  }
  bool marked_keys = false;
  for (auto& [k, v] : j.items()) {
    restore_bytes(v, peer);
    marked_keys = marked_keys || (!k.empty() && k[0] == '\0');
  }
  if (!marked_keys) return;
  nlohmann::json out = nlohmann::json::object();
  for (auto& [k, v] : j.items()) out[!k.empty() && k[0] == '\0' ? unbase64(k.substr(1), peer) : k] = std::move(v);
  j = std::move(out);
}

}  // namespace hvrun
