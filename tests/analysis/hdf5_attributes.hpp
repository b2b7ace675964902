// Reading an HDF5 object's string attribute, for the results-file tests.
#pragma once

#include <string>

#include <H5Cpp.h>

namespace wafersim::analysis {

inline std::string string_attr(const H5::H5Object& o, const char* name) {
  const H5::Attribute a = o.openAttribute(name);
  std::string s;
  a.read(a.getStrType(), s);
  return s;
}

}  // namespace wafersim::analysis
