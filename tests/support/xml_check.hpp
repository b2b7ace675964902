// A strict, small XML well-formedness check for the SVG and HTML the reports
// write (they are written as XHTML-compatible text, so a browser and an XML
// parser read them alike): balanced tags, quoted attributes, known entities,
// no stray '<' or '&'. Returns "" when well formed, else what is wrong and where.
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace wafersim::test_support {

inline std::string xml_problem(std::string_view s) {
  std::vector<std::string> open;
  std::size_t i = 0;
  const auto where = [&](std::size_t at) { return " at offset " + std::to_string(at); };
  const auto entity_ok = [&](std::size_t at) {
    const std::size_t end = s.find(';', at);
    if (end == std::string_view::npos || end - at > 10) return false;
    const std::string_view e = s.substr(at + 1, end - at - 1);
    if (e == "amp" || e == "lt" || e == "gt" || e == "quot" || e == "apos") return true;
    if (e.size() >= 2 && e[0] == '#') {
      for (std::size_t k = 1; k < e.size(); ++k)
        if (!std::isdigit(static_cast<unsigned char>(e[k]))) return false;
      return true;
    }
    return false;
  };
  const auto is_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' ||
           c == '.';
  };
  bool root_seen = false;
  while (i < s.size()) {
    if (s[i] == '&') {
      if (!entity_ok(i)) return "bad entity" + where(i);
      ++i;
    } else if (s[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(s[i])))
        return "text outside the root element" + where(i);
      ++i;
    } else if (s.substr(i, 4) == "<!--") {
      const std::size_t e = s.find("-->", i);
      if (e == std::string_view::npos) return "unclosed comment" + where(i);
      i = e + 3;
    } else if (s.substr(i, 2) == "<?" || s.substr(i, 2) == "<!") {
      if (!open.empty() || root_seen) return "declaration inside the document" + where(i);
      const std::size_t e = s.find('>', i);
      if (e == std::string_view::npos) return "unclosed declaration" + where(i);
      i = e + 1;
    } else if (s.substr(i, 2) == "</") {
      std::size_t k = i + 2;
      while (k < s.size() && is_name(s[k])) ++k;
      const std::string name(s.substr(i + 2, k - i - 2));
      while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
      if (k >= s.size() || s[k] != '>') return "bad end tag" + where(i);
      if (open.empty() || open.back() != name)
        return "end tag </" + name + "> does not match <" + (open.empty() ? "" : open.back()) +
               ">" + where(i);
      open.pop_back();
      i = k + 1;
    } else {
      std::size_t k = i + 1;
      while (k < s.size() && is_name(s[k])) ++k;
      const std::string name(s.substr(i + 1, k - i - 1));
      if (name.empty()) return "stray '<'" + where(i);
      if (open.empty() && root_seen) return "second root element" + where(i);
      std::vector<std::string> attrs;
      for (;;) {
        while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
        if (k >= s.size()) return "unclosed tag <" + name + ">" + where(i);
        if (s[k] == '>') {
          open.push_back(name);
          root_seen = true;
          i = k + 1;
          break;
        }
        if (s.substr(k, 2) == "/>") {
          root_seen = true;
          i = k + 2;
          break;
        }
        const std::size_t a = k;
        while (k < s.size() && is_name(s[k])) ++k;
        const std::string attr(s.substr(a, k - a));
        if (attr.empty() || k + 1 >= s.size() || s[k] != '=' ||
            (s[k + 1] != '"' && s[k + 1] != '\''))
          return "attribute without a quoted value in <" + name + ">" + where(a);
        for (const auto& seen : attrs)
          if (seen == attr) return "attribute " + attr + " twice in <" + name + ">" + where(a);
        attrs.push_back(attr);
        const char q = s[k + 1];
        const std::size_t e = s.find(q, k + 2);
        if (e == std::string_view::npos) return "unclosed attribute value" + where(a);
        for (std::size_t v = k + 2; v < e; ++v) {
          if (s[v] == '<') return "'<' in an attribute value" + where(v);
          if (s[v] == '&' && !entity_ok(v)) return "bad entity in an attribute value" + where(v);
        }
        k = e + 1;
      }
    }
  }
  if (!open.empty()) return "unclosed element <" + open.back() + ">";
  if (!root_seen) return "no root element";
  return "";
}

// Every "<svg" ... "</svg>" element (not nested) in a document.
inline std::vector<std::string> svg_elements(const std::string& doc) {
  std::vector<std::string> out;
  for (std::size_t at = doc.find("<svg"); at != std::string::npos; at = doc.find("<svg", at + 1)) {
    const std::size_t end = doc.find("</svg>", at);
    if (end == std::string::npos) break;
    out.push_back(doc.substr(at, end + 6 - at));
    at = end;
  }
  return out;
}

// URLs a viewer would fetch: any "http://", "https://" or "//" reference
// other than the SVG namespace name (which is a name, never fetched).
inline std::vector<std::string> external_references(const std::string& doc) {
  std::vector<std::string> found;
  for (const char* scheme : {"http://", "https://", "src=\"//", "href=\"//", "url(//", "@import"}) {
    for (std::size_t at = doc.find(scheme); at != std::string::npos;
         at = doc.find(scheme, at + 1)) {
      if (doc.compare(at, 26, "http://www.w3.org/2000/svg") == 0) continue;
      found.push_back(doc.substr(at, 60));
    }
  }
  return found;
}

}  // namespace wafersim::test_support
