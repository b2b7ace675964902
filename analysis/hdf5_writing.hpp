// HDF5 writing shared by the results writers (hdf5_output.cpp,
// serving_output.cpp): little-endian file types, objects without time stamps
// (identical runs give identical bytes), described datasets, and files
// written whole or not at all. Private to analysis/.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <H5Cpp.h>
#include <fmt/format.h>

#include "analysis/hdf5_output.hpp"
#include "analysis/output_file.hpp"

namespace wafersim::analysis::h5 {

// ---- HDF5 plumbing -------------------------------------------------------

// Collects the deepest message of an HDF5 error stack: the one that says what
// went wrong ("unable to open file ... No such file or directory").
inline herr_t collect_deepest(unsigned, const H5E_error2_t* err, void* out) {
  if (err->desc != nullptr && *err->desc != '\0') *static_cast<std::string*>(out) = err->desc;
  return 0;
}

// HDF5 prints its error stack to stderr by default. While this guard lives it
// prints nothing and keeps the first failure's message instead, for the typed
// exception we throw: by the time the C++ exception is caught, destructors have
// made other HDF5 calls, which clear the stack.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, &QuietHdf5Errors::record, &first_error_);
  }
  ~QuietHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

  std::string describe(const H5::Exception& e) const {
    std::string message =
        e.getFuncName().empty() ? e.getDetailMsg() : e.getFuncName() + ": " + e.getDetailMsg();
    if (!first_error_.empty()) message += " (" + first_error_ + ")";
    return message;
  }

 private:
  static herr_t record(hid_t stack, void* client) {
    auto* first = static_cast<std::string*>(client);
    if (first->empty()) H5Ewalk2(stack, H5E_WALK_DOWNWARD, collect_deepest, first);
    return 0;
  }

  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
  std::string first_error_;
};

// File (little-endian, fixed) and memory (native) types per C++ type.
template <class T>
struct H5Type;
template <>
struct H5Type<std::uint64_t> {
  static const H5::PredType& file() { return H5::PredType::STD_U64LE; }
  static const H5::PredType& memory() { return H5::PredType::NATIVE_UINT64; }
};
template <>
struct H5Type<std::int32_t> {
  static const H5::PredType& file() { return H5::PredType::STD_I32LE; }
  static const H5::PredType& memory() { return H5::PredType::NATIVE_INT32; }
};
template <>
struct H5Type<std::uint8_t> {
  static const H5::PredType& file() { return H5::PredType::STD_U8LE; }
  static const H5::PredType& memory() { return H5::PredType::NATIVE_UINT8; }
};
template <>
struct H5Type<double> {
  static const H5::PredType& file() { return H5::PredType::IEEE_F64LE; }
  static const H5::PredType& memory() { return H5::PredType::NATIVE_DOUBLE; }
};

inline H5::StrType utf8_string() {
  H5::StrType t(H5::PredType::C_S1, H5T_VARIABLE);
  t.setCset(H5T_CSET_UTF8);
  return t;
}

// ---- writing -------------------------------------------------------------

// Objects carry no creation/modification times, so identical runs give
// byte-identical files.
inline H5::DSetCreatPropList dataset_properties() {
  H5::DSetCreatPropList p;
  H5Pset_obj_track_times(p.getId(), false);
  return p;
}

// The C++ API has no setter for time tracking on groups, so the group is made
// with the C API and handed to an H5::Group.
inline H5::Group make_group(H5::Group& parent, const char* name) {
  const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  if (gcpl < 0) throw H5::PropListIException("make_group", "H5Pcreate failed");
  H5Pset_obj_track_times(gcpl, false);
  const hid_t id = H5Gcreate2(parent.getId(), name, H5P_DEFAULT, gcpl, H5P_DEFAULT);
  H5Pclose(gcpl);
  if (id < 0) throw H5::GroupIException("make_group", std::string("H5Gcreate2 failed: ") + name);
  H5::Group group(id);  // takes a reference of its own...
  H5Idec_ref(id);       // ...so drop ours, or the group (and the file) would stay open
  return group;
}

inline void set_attr(H5::H5Object& obj, const char* name, std::string_view value) {
  const H5::StrType type = utf8_string();
  H5::Attribute a = obj.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  a.write(type, std::string(value));
}

template <class T>
requires std::is_arithmetic_v<T>
void set_attr(H5::H5Object& obj, const char* name, T value) {
  H5::Attribute a = obj.createAttribute(name, H5Type<T>::file(), H5::DataSpace(H5S_SCALAR));
  a.write(H5Type<T>::memory(), &value);
}

inline void describe_dataset(H5::DataSet& ds, std::string_view units,
                             std::string_view description) {
  set_attr(ds, "units", units);
  set_attr(ds, "description", description);
}

template <class T>
H5::DataSet write_scalar(H5::Group& g, const char* name, T value, std::string_view units,
                         std::string_view description) {
  H5::DataSet ds =
      g.createDataSet(name, H5Type<T>::file(), H5::DataSpace(H5S_SCALAR), dataset_properties());
  ds.write(&value, H5Type<T>::memory());
  describe_dataset(ds, units, description);
  return ds;
}

// A 1-D array of variable-length UTF-8 strings.
inline void write_strings(H5::Group& g, const char* name, const std::vector<std::string>& v,
                          std::string_view units, std::string_view description) {
  const H5::StrType type = utf8_string();
  const hsize_t n = v.size();
  H5::DataSet ds = g.createDataSet(name, type, H5::DataSpace(1, &n), dataset_properties());
  std::vector<const char*> ptrs;
  for (const std::string& s : v) ptrs.push_back(s.c_str());
  if (n > 0) ds.write(ptrs.data(), type);
  describe_dataset(ds, units, description);
}

// An N-D array. Large ones (per-core arrays of a full wafer: ~900k cores) are
// chunked by rows and deflated; they are mostly zeros outside the placement.
template <class T>
H5::DataSet write_array(H5::Group& g, const char* name, std::span<const T> data,
                        std::vector<hsize_t> dims, std::string_view units,
                        std::string_view description) {
  hsize_t count = 1;
  for (hsize_t d : dims) count *= d;
  if (count != data.size()) throw std::logic_error(std::string("HDF5 array shape: ") + name);

  H5::DSetCreatPropList props = dataset_properties();
  constexpr hsize_t kChunkElements = 64 * 1024;  // 512 KiB of uint64
  if (count >= 4096 && H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
    std::vector<hsize_t> chunk = dims;
    const hsize_t row = count / dims[0];  // elements per index of the first axis
    chunk[0] = std::clamp<hsize_t>(kChunkElements / std::max<hsize_t>(row, 1), 1, dims[0]);
    props.setChunk(static_cast<int>(chunk.size()), chunk.data());
    props.setShuffle();
    props.setDeflate(4);
  }
  H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  H5::DataSet ds = g.createDataSet(name, H5Type<T>::file(), space, props);
  if (count > 0) ds.write(data.data(), H5Type<T>::memory());
  describe_dataset(ds, units, description);
  return ds;
}

template <class T>
H5::DataSet write_vector(H5::Group& g, const char* name, const std::vector<T>& v,
                         std::string_view units, std::string_view description) {
  return write_array<T>(g, name, v, {static_cast<hsize_t>(v.size())}, units, description);
}

// Writes `path` by calling `write(temp)` on a temporary file beside it, then
// syncing it and renaming it over `path`; on any failure the temporary is
// removed, any older file at `path` stays, and an OutputError names `path`.
inline void write_atomically(const std::filesystem::path& path,
                             const std::function<void(const std::filesystem::path&)>& write) {
  std::filesystem::path temp = path;
  temp += fmt::format(".tmp.{}", ::getpid());
  const TemporaryFile registered(temp);  // an interrupt removes it
  const QuietHdf5Errors quiet;
  const auto discard_temp = [&] {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
  };
  try {
    write(temp);
    sync_file(temp);
    std::filesystem::rename(temp, path);
  } catch (const H5::Exception& e) {
    discard_temp();
    throw OutputError(path, "HDF5: " + quiet.describe(e));
  } catch (const std::exception& e) {  // filesystem, fsync, a result not shaped like its mesh
    discard_temp();
    throw OutputError(path, e.what());
  } catch (...) {
    discard_temp();
    throw;
  }
}

}  // namespace wafersim::analysis::h5
