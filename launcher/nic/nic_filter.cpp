#include "launcher/nic/nic_filter.hpp"

#include <algorithm>
#include <tuple>

#include "common/error.hpp"

namespace hvrun {

namespace {

constexpr std::size_t kMaxNameLength = 15;  // IFNAMSIZ - 1

[[noreturn]] void bad(std::string_view item, const std::string& why) {
  throw UsageError("--network-interface: '" + std::string(item) + "': " + why);
}

struct Marks {
  bool exclude = false;
  bool exact = false;
};

// Splits "^=body" into its marks and body; `typed` is the item as the user wrote it, for messages.
std::pair<Marks, std::string_view> take_marks(std::string_view item, std::string_view typed) {
  Marks m;
  if (item.starts_with('^')) {
    m.exclude = true;
    item.remove_prefix(1);
  }
  if (item.starts_with('=')) {
    m.exact = true;
    item.remove_prefix(1);
  }
  if (item.empty()) bad(typed, "a mark needs a name, prefix or subnet after it");
  if (item.starts_with('^')) bad(typed, m.exact ? "'^' must come before '='" : "'^' given twice");
  if (item.starts_with('=')) bad(typed, "'=' given twice");
  return {m, item};
}

// Shell-quotes a value when it holds anything beyond a plain word ('^' is special in zsh and fish).
std::string shell_word(const std::string& s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_.,:/=@%+-").find(c) != std::string_view::npos;
  });
  if (plain && !s.empty()) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

NicFilter NicFilter::parse(const std::vector<std::string>& values) {
  NicFilter f;
  for (const std::string& value : values) {
    if (value.empty()) bad(value, "empty value");
    Marks list;  // the value's own marks, taken from its first item
    std::size_t start = 0;
    for (bool first = true;; first = false) {
      const std::size_t comma = value.find(',', start);
      const std::string_view typed =
          std::string_view(value).substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (typed.empty()) bad(value, "empty item (two commas in a row, or one at either end)");
      auto [own, body] = take_marks(typed, typed);
      if (first) list = own;
      Item item;
      item.exclude = own.exclude || list.exclude;
      const bool exact = own.exact || list.exact;
      if (body.find('/') != std::string_view::npos) {
        std::string why;
        item.kind = Kind::kSubnet;
        item.subnet = IpSubnet::parse(body, &why);
        if (!item.subnet) bad(typed, why);
      } else if (is_ip_address(body)) {
        bad(typed, "an address needs a prefix length (" + std::string(body) +
                       (body.find(':') != std::string_view::npos ? "/128" : "/32") + " for this address alone)");
      } else {
        if (body.size() > kMaxNameLength) bad(typed, "longer than an interface name can be (15 characters)");
        if (std::any_of(body.begin(), body.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n'; }))
          bad(typed, "an interface name has no blanks");
        item.kind = exact ? Kind::kExact : Kind::kPrefix;
        item.name = std::string(body);
      }
      f.add(std::move(item));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return f;
}

void NicFilter::add(Item item) {
  auto& list = item.exclude ? excludes_ : includes_;
  if (std::find(list.begin(), list.end(), item) != list.end()) return;
  list.push_back(std::move(item));
  if (list.back().exclude) {
    // Canonical order lets values() merge exclusions: the ones marked only '^' first, then '^='.
    std::sort(excludes_.begin(), excludes_.end(), [](const Item& a, const Item& b) {
      return std::forward_as_tuple(a.kind == Kind::kExact, item_text(a)) <
             std::forward_as_tuple(b.kind == Kind::kExact, item_text(b));
    });
  }
}

bool NicFilter::matches(const Item& item, const InterfaceInfo& nic) {
  switch (item.kind) {
    case Kind::kPrefix:
      return nic.name.starts_with(item.name);
    case Kind::kExact:
      return nic.name == item.name;
    case Kind::kSubnet:
      return std::any_of(nic.addresses.begin(), nic.addresses.end(),
                         [&](const std::string& a) { return item.subnet->contains(a); });
  }
  return false;
}

bool NicFilter::allows(const InterfaceInfo& nic) const {
  for (const Item& x : excludes_)
    if (matches(x, nic)) return false;
  return includes_.empty() || order(nic).has_value();
}

std::optional<std::size_t> NicFilter::order(const InterfaceInfo& nic) const {
  for (std::size_t i = 0; i < includes_.size(); ++i)
    if (matches(includes_[i], nic)) return i;
  return std::nullopt;
}

bool NicFilter::admits_address(const InterfaceInfo& nic, std::string_view address) const {
  bool by_subnet = false;
  for (const Item& x : includes_) {
    if (!matches(x, nic)) continue;
    if (x.kind != Kind::kSubnet) return true;
    by_subnet = by_subnet || x.subnet->contains(address);
  }
  return includes_.empty() || by_subnet;
}

bool NicFilter::selects_any(const std::vector<InterfaceInfo>& nics) const {
  return includes_.empty() ||
         std::any_of(nics.begin(), nics.end(), [&](const InterfaceInfo& n) { return order(n).has_value(); });
}

std::vector<std::string> NicFilter::inclusions() const {
  std::vector<std::string> out;
  for (const Item& x : includes_) out.push_back(item_text(x));
  return out;
}

std::string NicFilter::item_text(const Item& item) {
  std::string marks = item.exclude ? "^" : "";
  if (item.kind == Kind::kExact) marks += "=";
  return marks + (item.kind == Kind::kSubnet ? item.subnet->text() : item.name);
}

std::vector<std::string> NicFilter::values() const {
  std::vector<std::string> out;
  Marks list;
  const auto fits = [&list](const Item& x) {
    return (!list.exclude || x.exclude) && (!list.exact || x.kind != Kind::kPrefix);
  };
  const auto append = [&](const Item& x) {
    if (!out.empty() && fits(x)) {
      out.back() += "," + item_text(x);
      return;
    }
    // A new value: its first item's marks become the whole value's.
    list = Marks{x.exclude, x.kind == Kind::kExact};
    out.push_back(item_text(x));
  };
  for (const Item& x : includes_) append(x);
  for (const Item& x : excludes_) append(x);
  return out;
}

std::string NicFilter::text() const {
  std::string out;
  for (const std::string& v : values())
    out += (out.empty() ? "" : " ") + std::string("--network-interface ") + shell_word(v);
  return out;
}

}  // namespace hvrun
