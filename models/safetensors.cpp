#include "models/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>

#include "models/dtype.hpp"
#include "models/sha256.hpp"
#include "models/work_team.hpp"

namespace wafersim::models {

namespace fs = std::filesystem;
using nlohmann::json;

WeightsError::WeightsError(std::string file, std::string tensor, const std::string& what)
    : std::runtime_error(file + ": error: " + (tensor.empty() ? std::string() : tensor + ": ") +
                         what),
      file_(std::move(file)),
      tensor_(std::move(tensor)) {}

namespace {

// Element sizes of the safetensors dtypes (the format's Dtype enum).
std::size_t element_size(const std::string& dtype) {
  static const std::map<std::string, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace

SafetensorsFile::SafetensorsFile(const fs::path& file) : path_(file.string()) {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw WeightsError(path_, "", std::string("cannot open file: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw WeightsError(path_, "", std::string("cannot stat file: ") + std::strerror(err));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw WeightsError(
        path_, "",
        "truncated: " + std::to_string(size_) + " bytes, shorter than the 8-byte header length");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw WeightsError(path_, "", std::string("cannot map file: ") + std::strerror(errno));
  }
  try {
    const auto* bytes = static_cast<const unsigned char*>(map_);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
    if (header_len > size_ - 8) {
      throw WeightsError(path_, "",
                         "truncated: the header says " + std::to_string(header_len) +
                             " bytes of JSON, but only " + std::to_string(size_ - 8) +
                             " bytes follow");
    }
    const std::string_view text(reinterpret_cast<const char*>(bytes + 8), header_len);
    // nlohmann stops at a NUL byte as at the end of the input: what follows
    // one would never be read.
    if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
      throw WeightsError(
          path_, "", "bad header: a NUL byte at offset " + std::to_string(nul) + " of the JSON");
    }
    json header;
    std::set<std::string> names;  // nlohmann keeps the last of two equal keys silently
    try {
      header = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1 &&
            !names.insert(parsed.get<std::string>()).second) {
          throw WeightsError(path_, parsed.get<std::string>(),
                             "bad header: the name appears twice");
        }
        return true;
      });
    } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
      throw WeightsError(path_, "", std::string("bad header: invalid JSON: ") + e.what());
    }
    if (!header.is_object()) throw WeightsError(path_, "", "bad header: expected a JSON object");
    const unsigned char* data = bytes + 8 + header_len;
    const std::size_t data_size = size_ - 8 - static_cast<std::size_t>(header_len);
    for (const auto& item : header.items()) {
      // Named, not structured bindings: clang 14 cannot capture those in a lambda.
      const std::string& name = item.key();
      const nlohmann::json& entry = item.value();
      auto bad = [&](const std::string& what) {
        throw WeightsError(path_, name, "bad header: " + what);
      };
      if (name == "__metadata__") {
        if (!entry.is_object()) bad("expected an object of strings");
        for (const auto& [key, value] : entry.items()) {
          if (!value.is_string()) bad(key + ": expected a string");
        }
        continue;
      }
      if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
          !entry.contains("data_offsets")) {
        bad("each tensor needs dtype, shape and data_offsets");
      }
      Tensor t;
      if (!entry["dtype"].is_string()) bad("dtype must be a string");
      t.dtype = entry["dtype"].get<std::string>();
      const std::size_t esize = element_size(t.dtype);
      if (esize == 0) bad("unknown dtype '" + t.dtype + "'");
      const json& shape = entry["shape"];
      if (!shape.is_array()) bad("shape must be a list of whole numbers");
      std::uint64_t elements = 1;
      for (const json& d : shape) {
        if (!d.is_number_unsigned()) bad("shape must be a list of whole numbers >= 0");
        const std::uint64_t dim = d.get<std::uint64_t>();
        // Neither the int64 shape nor the element count may wrap.
        if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
            (dim != 0 && elements > std::numeric_limits<std::uint64_t>::max() / dim)) {
          bad("shape dimension " + std::to_string(dim) + " makes more than 2^64 elements");
        }
        t.shape.push_back(static_cast<std::int64_t>(dim));
        elements *= dim;
      }
      if (elements > std::numeric_limits<std::uint64_t>::max() / esize) {
        bad("shape " + shape_text(t.shape) + " of " + t.dtype + " needs more than 2^64 bytes");
      }
      const json& off = entry["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
          !off[1].is_number_unsigned()) {
        bad("data_offsets must be [begin, end]");
      }
      const std::uint64_t begin = off[0].get<std::uint64_t>();
      const std::uint64_t end = off[1].get<std::uint64_t>();
      if (begin > end) bad("data_offsets begin > end");
      if (end > data_size) {
        throw WeightsError(path_, name,
                           "truncated: the data ends at byte " + std::to_string(end) +
                               " of the data area, which has only " + std::to_string(data_size) +
                               " bytes");
      }
      if (end - begin != elements * esize) {
        bad("data_offsets span " + std::to_string(end - begin) + " bytes, but shape " +
            shape_text(t.shape) + " of " + t.dtype + " needs " + std::to_string(elements * esize));
      }
      t.data = data + begin;
      t.bytes = static_cast<std::size_t>(end - begin);
      tensors_.emplace(name, std::move(t));
    }
    // No two tensors may share bytes (the format lays them end to end).
    std::vector<std::pair<std::pair<std::size_t, std::size_t>, std::string>> spans;
    for (const auto& [name, t] : tensors_) {
      const auto begin = static_cast<std::size_t>(t.data - data);
      if (t.bytes > 0) spans.push_back({{begin, begin + t.bytes}, name});
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].first.first < spans[i - 1].first.second) {
        throw WeightsError(path_, spans[i].second,
                           "bad header: data_offsets overlap those of " + spans[i - 1].second);
      }
    }
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

void SafetensorsFile::release(const void* data, std::size_t bytes) const {
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + page - 1) / page * page;
  const std::uintptr_t last = (begin + bytes) / page * page;
  if (last > first)  // advice only: a failure leaves the pages resident, nothing else
    (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

namespace {

// Element k of a float tensor (F32, BF16, F16, F8_E4M3) as fp32.
float element(const SafetensorsFile::Tensor& t, std::size_t k) {
  const unsigned char* d = t.data;
  if (t.dtype == "F32") {
    float f;
    std::memcpy(&f, d + 4 * k, 4);
    return f;
  }
  if (t.dtype == "F8_E4M3") return fp8_e4m3_bits_to_float(d[k]);
  const auto bits = static_cast<std::uint16_t>(d[2 * k] | (d[2 * k + 1] << 8));
  return t.dtype == "BF16" ? bf16_bits_to_float(bits) : fp16_bits_to_float(bits);
}

// Stored elements [k, k + n) widened to fp32 (the dtype tested once per run).
void widen(const SafetensorsFile::Tensor& t, std::size_t k, std::size_t n, float* out) {
  const unsigned char* d = t.data;
  if (t.dtype == "F32") {
    std::memcpy(out, d + 4 * k, 4 * n);  // little-endian host
  } else if (t.dtype == "BF16") {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = bf16_bits_to_float(
          static_cast<std::uint16_t>(d[2 * (k + i)] | (d[2 * (k + i) + 1] << 8)));
  } else if (t.dtype == "F16") {
    for (std::size_t i = 0; i < n; ++i)
      out[i] = fp16_bits_to_float(
          static_cast<std::uint16_t>(d[2 * (k + i)] | (d[2 * (k + i) + 1] << 8)));
  } else {  // F8_E4M3
    for (std::size_t i = 0; i < n; ++i) out[i] = fp8_e4m3_bits_to_float(d[k + i]);
  }
}

}  // namespace

std::vector<float> SafetensorsFile::read_fp32(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw WeightsError(path_, name, "no such tensor in this file");
  const Tensor& t = it->second;
  if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16") {
    throw WeightsError(path_, name,
                       "dtype " + t.dtype + " is not supported; expected BF16, F16 or F32");
  }
  std::vector<float> out(t.bytes / (t.dtype == "F32" ? 4 : 2));
  widen(t, 0, out.size(), out.data());
  return out;
}

std::optional<fs::path> checkpoint_weights_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  if (fs::is_regular_file(path / "model.safetensors.index.json", ec))
    return path / "model.safetensors.index.json";
  if (fs::is_regular_file(path / "model.safetensors", ec)) return path / "model.safetensors";
  return std::nullopt;
}

namespace {

using Tensor = SafetensorsFile::Tensor;
using Shape = std::vector<std::int64_t>;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A stored 2-D weight [rows][cols] and, for FP8, its scales: what one matrix
// of ours is read from, row by row (or column by column for gpt2's Conv1D).
struct StoredMatrix {
  const SafetensorsFile* file = nullptr;
  const Tensor* t = nullptr;
  std::int64_t rows = 0, cols = 0;
  const Tensor* scale = nullptr;  // FP8 only
  enum class Scaling { none, tensor, row, block } scaling = Scaling::none;
  std::int64_t block = 0;  // Scaling::block: B
  std::int64_t scale_cols = 0;

  float scale_at(std::int64_t r, std::int64_t c) const {
    switch (scaling) {
      case Scaling::tensor:
        return element(*scale, 0);
      case Scaling::row:
        return element(*scale, static_cast<std::size_t>(r));
      case Scaling::block:
        return element(*scale, static_cast<std::size_t>((r / block) * scale_cols + c / block));
      default:
        return 1.0f;
    }
  }
  // Stored row r, columns [c0, c0 + n), as fp32 (FP8: code x scale in fp32).
  void row(std::int64_t r, std::int64_t c0, std::int64_t n, float* out) const {
    widen(*t, static_cast<std::size_t>(r * cols + c0), static_cast<std::size_t>(n), out);
    if (scaling == Scaling::none) return;
    for (std::int64_t j = 0; j < n; ++j) out[j] = out[j] * scale_at(r, c0 + j);
  }
  // Stored column c as fp32 (gpt2's Conv1D is stored [in][out]).
  void column(std::int64_t c, float* out) const {
    for (std::int64_t r = 0; r < rows; ++r) {
      out[r] = element(*t, static_cast<std::size_t>(r * cols + c));
      if (scaling != Scaling::none) out[r] = out[r] * scale_at(r, c);
    }
  }
};

// All tensors of a checkpoint, from one or several files.
class Checkpoint {
 public:
  explicit Checkpoint(const fs::path& path) {
    const std::optional<fs::path> file = checkpoint_weights_file(path);
    if (!file) {
      throw WeightsError(path.string(), "",
                         "no model.safetensors or model.safetensors.index.json in this folder");
    }
    const fs::path& p = *file;
    if (ends_with(p.filename().string(), ".json")) {
      read_index(p);
    } else {
      files_.push_back(std::make_unique<SafetensorsFile>(p));
      for (const auto& [tensor, info] : files_.back()->tensors())
        where_[tensor] = files_.back().get();
    }
    origin_ = p.string();
  }

  const std::string& origin() const { return origin_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  bool has(const std::string& tensor) const { return where_.count(tensor) != 0; }

  // The tensor, checked for shape, marked used.
  const Tensor& find(const std::string& tensor, const Shape& shape) {
    const auto it = where_.find(tensor);
    if (it == where_.end()) {
      throw WeightsError(origin_, tensor,
                         "missing tensor (expected shape " + shape_text(shape) + ")");
    }
    const SafetensorsFile& f = *it->second;
    const Tensor& t = f.tensors().at(tensor);
    if (t.shape != shape) {
      throw WeightsError(
          f.path(), tensor,
          "shape " + shape_text(t.shape) + " where the config needs " + shape_text(shape));
    }
    used_.insert(tensor);
    return t;
  }
  const std::string& file_of(const std::string& tensor) const { return where_.at(tensor)->path(); }

  // A vector (or small table), as fp32 in the file's row-major layout.
  std::vector<float> read(const std::string& tensor, const Shape& shape) {
    find(tensor, shape);
    return where_.at(tensor)->read_fp32(tensor);
  }

  // A weight matrix [rows][cols] with, for FP8, its scales.
  StoredMatrix matrix(const std::string& tensor, std::int64_t rows, std::int64_t cols) {
    StoredMatrix m;
    m.t = &find(tensor, {rows, cols});
    m.file = where_.at(tensor);
    m.rows = rows;
    m.cols = cols;
    const std::string& dt = m.t->dtype;
    if (dt == "F32" || dt == "BF16" || dt == "F16") return m;
    if (dt != "F8_E4M3") {
      throw WeightsError(file_of(tensor), tensor,
                         "dtype " + dt + " is not supported; expected BF16, F16, F32 or F8_E4M3");
    }
    const std::string prefix =
        ends_with(tensor, ".weight") ? tensor.substr(0, tensor.size() - 7) : tensor;
    if (has(prefix + ".weight_scale")) {
      const std::string name = prefix + ".weight_scale";
      const Tensor& s = where_.at(name)->tensors().at(name);
      std::uint64_t n = 1;
      for (const std::int64_t d : s.shape) n *= static_cast<std::uint64_t>(d);
      const bool per_row = n == static_cast<std::uint64_t>(rows) &&
                           (s.shape.size() == 1 || (s.shape.size() == 2 && s.shape[1] == 1)) &&
                           rows > 1;
      if (n == 1 && s.shape.size() <= 2) {
        m.scaling = StoredMatrix::Scaling::tensor;
      } else if (per_row) {
        m.scaling = StoredMatrix::Scaling::row;
      } else {
        throw WeightsError(file_of(name), name,
                           "shape " + shape_text(s.shape) + ": an FP8 weight scale is one value " +
                               "([] or [1]) or one per row ([" + std::to_string(rows) + "] or [" +
                               std::to_string(rows) + ", 1])");
      }
      m.scale = &check_scale_dtype(name, s);
      used_.insert(name);
      return m;
    }
    if (has(prefix + ".weight_scale_inv")) {
      const std::string name = prefix + ".weight_scale_inv";
      const Tensor& s = where_.at(name)->tensors().at(name);
      // The smallest power of two that gives the scale's shape: a larger one
      // that gives it too means a single block along both dimensions, the same
      // scales either way.
      if (s.shape.size() == 2) {
        for (std::int64_t blk = 1; blk <= (std::int64_t{1} << 30) && m.block == 0; blk *= 2) {
          if ((rows + blk - 1) / blk == s.shape[0] && (cols + blk - 1) / blk == s.shape[1])
            m.block = blk;
        }
      }
      if (m.block == 0) {
        throw WeightsError(file_of(name), name,
                           "shape " + shape_text(s.shape) +
                               " is not one scale per square block of a power-of-two size for a [" +
                               std::to_string(rows) + ", " + std::to_string(cols) + "] weight");
      }
      m.scaling = StoredMatrix::Scaling::block;
      m.scale_cols = s.shape[1];
      m.scale = &check_scale_dtype(name, s);
      used_.insert(name);
      return m;
    }
    throw WeightsError(file_of(tensor), tensor,
                       "an F8_E4M3 weight needs its scales: no " + prefix + ".weight_scale or " +
                           prefix + ".weight_scale_inv in the checkpoint");
  }
  void skip(const std::string& tensor) { used_.insert(tensor); }

  // Every tensor must have been read or skipped.
  void check_all_used(const std::function<bool(const std::string&)>& ignorable) const {
    for (const auto& [tensor, file] : where_) {
      if (used_.count(tensor) == 0 && !ignorable(tensor)) {
        throw WeightsError(file->path(), tensor,
                           "unexpected tensor: the model config has no place for it (wrong "
                           "architecture or layer count?)");
      }
    }
  }

 private:
  const Tensor& check_scale_dtype(const std::string& name, const Tensor& s) const {
    if (s.dtype != "F32" && s.dtype != "BF16" && s.dtype != "F16") {
      throw WeightsError(file_of(name), name,
                         "dtype " + s.dtype + " for a weight scale; expected F32, BF16 or F16");
    }
    return s;
  }

  void read_index(const fs::path& index) {
    const std::string shown = index.string();
    std::error_code ec;
    if (!fs::is_regular_file(index, ec)) throw WeightsError(shown, "", "not a regular file");
    std::ifstream in(index, std::ios::binary);
    if (!in) throw WeightsError(shown, "", "cannot open file");
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
      throw WeightsError(shown, "", std::string("bad index: invalid JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw WeightsError(shown, "", "bad index: expected an object with a weight_map");
    }
    std::map<std::string, SafetensorsFile*> opened;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw WeightsError(shown, tensor, "bad index: the shard must be a file name");
      const std::string shard = file.get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
        throw WeightsError(shown, tensor,
                           "bad index: shard '" + shard + "' must be a file name in the folder");
      }
      if (opened.count(shard) == 0) {
        files_.push_back(std::make_unique<SafetensorsFile>(index.parent_path() / shard));
        opened[shard] = files_.back().get();
      }
      SafetensorsFile* f = opened[shard];
      if (f->tensors().count(tensor) == 0) {
        throw WeightsError(f->path(), tensor,
                           "the index places this tensor here, but it is not in the file");
      }
      where_[tensor] = f;
    }
    // Tensors in shards that the index does not list are unexpected too.
    for (const auto& [shard, f] : opened) {
      for (const auto& [tensor, info] : f->tensors()) {
        if (where_.count(tensor) == 0) where_[tensor] = f;
      }
    }
  }

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, SafetensorsFile*> where_;
  std::set<std::string> used_;
  std::string origin_;
};

// The matrices to make, each a job: rows read from the mapped file, rounded to
// the dtype (quantize_row) and stored as the matrix holds them (set_row), so
// no fp32 copy of a whole matrix is made.
class MatrixJobs {
 public:
  MatrixJobs(DType dtype, HostStorage storage) : dtype_(dtype), storage_(storage) {}

  // into := the stored matrix as is.
  void plain(Matrix& into, StoredMatrix src) {
    // Stored at the run's precision already: the encodings copied as they are.
    const bool same_bits = storage_ == HostStorage::compact &&
                           src.scaling == StoredMatrix::Scaling::none &&
                           ((dtype_ == DType::bf16 && src.t->dtype == "BF16") ||
                            (dtype_ == DType::fp16 && src.t->dtype == "F16"));
    if (same_bits) {
      jobs_.push_back([this, &into, src] {
        into = Matrix::compact(static_cast<int>(src.rows), static_cast<int>(src.cols), dtype_);
        for (std::int64_t i = 0; i < src.rows; ++i)
          into.set_row_bits(static_cast<int>(i), src.t->data + 2 * i * src.cols);
        src.file->release(src.t->data, src.t->bytes);
      });
      return;
    }
    jobs_.push_back([this, &into, src] {
      into = make(static_cast<int>(src.rows), static_cast<int>(src.cols),
                  [&src](int i, std::span<float> row) {
                    src.row(i, 0, static_cast<std::int64_t>(row.size()), row.data());
                  });
      src.file->release(src.t->data, src.t->bytes);  // read once: no need to stay resident
    });
  }
  // into := columns [col0, col0 + rows) of a Conv1D weight stored [in][out],
  // transposed to our [out][in].
  void transposed(Matrix& into, StoredMatrix src, std::int64_t col0, int rows) {
    jobs_.push_back([this, &into, src, col0, rows] {
      into = make(rows, static_cast<int>(src.rows),
                  [&src, col0](int i, std::span<float> row) { src.column(col0 + i, row.data()); });
    });
  }
  std::vector<std::function<void()>>& jobs() { return jobs_; }

 private:
  Matrix make(int rows, int cols, const std::function<void(int, std::span<float>)>& fill) const {
    Matrix m = storage_ == HostStorage::compact && dtype_ != DType::fp32
                   ? Matrix::compact(rows, cols, dtype_)
                   : Matrix(rows, cols);
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (int i = 0; i < rows; ++i) {
      fill(i, row);
      const float scale = quantize_row(row, dtype_);
      m.set_row(i, row, scale);
    }
    return m;
  }
  DType dtype_;
  HostStorage storage_;
  std::vector<std::function<void()>> jobs_;
};

void store(std::vector<float>& v, DType dtype) {
  for (float& x : v) x = round_to_dtype(x, vector_dtype(dtype));
}

void load_gpt2(Checkpoint& ck, const ModelConfig& c, Weights& w, MatrixJobs& jobs) {
  const std::string p = ck.has("transformer.wte.weight") ? "transformer." : "";
  const int h = c.hidden_size, inter = c.intermediate_size;
  jobs.plain(w.embedding, ck.matrix(p + "wte.weight", c.vocab_size, h));
  jobs.plain(w.position_embedding, ck.matrix(p + "wpe.weight", c.max_position, h));
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    const std::string b = p + "h." + std::to_string(l) + ".";
    L.attn_norm = ck.read(b + "ln_1.weight", {h});
    L.attn_norm_bias = ck.read(b + "ln_1.bias", {h});
    const StoredMatrix qkv = ck.matrix(b + "attn.c_attn.weight", h, 3 * h);
    jobs.transposed(L.wq, qkv, 0, h);
    jobs.transposed(L.wk, qkv, h, h);
    jobs.transposed(L.wv, qkv, 2 * h, h);
    const std::vector<float> qkv_bias = ck.read(b + "attn.c_attn.bias", {3 * h});
    L.bq.assign(qkv_bias.begin(), qkv_bias.begin() + h);
    L.bk.assign(qkv_bias.begin() + h, qkv_bias.begin() + 2 * h);
    L.bv.assign(qkv_bias.begin() + 2 * h, qkv_bias.end());
    jobs.transposed(L.wo, ck.matrix(b + "attn.c_proj.weight", h, h), 0, h);
    L.bo = ck.read(b + "attn.c_proj.bias", {h});
    L.ffn_norm = ck.read(b + "ln_2.weight", {h});
    L.ffn_norm_bias = ck.read(b + "ln_2.bias", {h});
    jobs.transposed(L.w_up, ck.matrix(b + "mlp.c_fc.weight", h, inter), 0, inter);
    L.b_up = ck.read(b + "mlp.c_fc.bias", {inter});
    jobs.transposed(L.w_down, ck.matrix(b + "mlp.c_proj.weight", inter, h), 0, h);
    L.b_down = ck.read(b + "mlp.c_proj.bias", {h});
  }
  w.final_norm = ck.read(p + "ln_f.weight", {h});
  w.final_norm_bias = ck.read(p + "ln_f.bias", {h});
  if (ck.has("lm_head.weight")) ck.skip("lm_head.weight");  // tied to wte
}

void load_llama_family(Checkpoint& ck, const ModelConfig& c, Weights& w, MatrixJobs& jobs) {
  const int h = c.hidden_size, inter = c.intermediate_size, q = c.q_dim(), kv = c.kv_dim();
  auto matrix = [&](Matrix& into, const std::string& name, int rows, int cols) {
    jobs.plain(into, ck.matrix(name, rows, cols));
  };
  matrix(w.embedding, "model.embed_tokens.weight", c.vocab_size, h);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    const std::string b = "model.layers." + std::to_string(l) + ".";
    L.attn_norm = ck.read(b + "input_layernorm.weight", {h});
    L.ffn_norm = ck.read(b + "post_attention_layernorm.weight", {h});
    matrix(L.wq, b + "self_attn.q_proj.weight", q, h);
    matrix(L.wk, b + "self_attn.k_proj.weight", kv, h);
    matrix(L.wv, b + "self_attn.v_proj.weight", kv, h);
    matrix(L.wo, b + "self_attn.o_proj.weight", h, q);
    if (c.has_qkv_bias()) {
      L.bq = ck.read(b + "self_attn.q_proj.bias", {q});
      L.bk = ck.read(b + "self_attn.k_proj.bias", {kv});
      L.bv = ck.read(b + "self_attn.v_proj.bias", {kv});
    }
    if (c.has_o_bias()) L.bo = ck.read(b + "self_attn.o_proj.bias", {h});
    if (c.has_qk_norm()) {
      L.q_norm = ck.read(b + "self_attn.q_norm.weight", {c.head_dim});
      L.k_norm = ck.read(b + "self_attn.k_norm.weight", {c.head_dim});
    }
    if (c.is_moe()) {
      // Mixtral's names, or (Qwen3-MoE and the later ones) the dense MLP's.
      const bool mixtral = c.architecture == Architecture::mixtral;
      const std::string m = b + (mixtral ? "block_sparse_moe." : "mlp.");
      matrix(L.router, m + "gate.weight", c.num_experts, h);
      L.experts.resize(static_cast<std::size_t>(c.num_experts));
      for (int e = 0; e < c.num_experts; ++e) {
        ExpertWeights& E = L.experts[static_cast<std::size_t>(e)];
        const std::string x = m + "experts." + std::to_string(e) + ".";
        matrix(E.w_gate, x + (mixtral ? "w1.weight" : "gate_proj.weight"), inter, h);
        matrix(E.w_down, x + (mixtral ? "w2.weight" : "down_proj.weight"), h, inter);
        matrix(E.w_up, x + (mixtral ? "w3.weight" : "up_proj.weight"), inter, h);
      }
    } else {
      matrix(L.w_gate, b + "mlp.gate_proj.weight", inter, h);
      matrix(L.w_up, b + "mlp.up_proj.weight", inter, h);
      matrix(L.w_down, b + "mlp.down_proj.weight", h, inter);
    }
  }
  w.final_norm = ck.read("model.norm.weight", {h});
  if (c.tie_embeddings) {
    if (ck.has("lm_head.weight")) ck.skip("lm_head.weight");
  } else {
    matrix(w.lm_head, "lm_head.weight", c.vocab_size, h);
  }
}

// Tensors a checkpoint may hold that are not weights of the model.
bool ignorable(const ModelConfig& config, const std::string& t) {
  return ends_with(t, "rotary_emb.inv_freq") || ends_with(t, ".input_scale") ||
         ends_with(t, ".k_scale") || ends_with(t, ".v_scale") ||
         (config.is_gpt2() && (ends_with(t, ".attn.bias") || ends_with(t, ".attn.masked_bias")));
}

}  // namespace

namespace {

// Every name, shape and dtype checked against `config`, the vectors read and
// the matrices' jobs made (not run).
void plan_load(Checkpoint& ck, const ModelConfig& config, Weights& w, MatrixJobs& matrices) {
  config.validate();
  w.config = config;
  w.layers.resize(static_cast<std::size_t>(config.num_layers));
  if (config.is_gpt2()) {
    load_gpt2(ck, config, w, matrices);
  } else {
    load_llama_family(ck, config, w, matrices);
  }
  ck.check_all_used([&](const std::string& t) { return ignorable(config, t); });
}

}  // namespace

std::string check_safetensors(const fs::path& path, const ModelConfig& config) {
  Checkpoint ck(path);
  Weights w;
  MatrixJobs matrices(DType::fp32, HostStorage::fp32);
  plan_load(ck, config, w, matrices);
  return ck.origin();
}

Weights load_safetensors(const fs::path& path, const ModelConfig& config, DType dtype,
                         const LoadOptions& options) {
  Checkpoint ck(path);
  Weights w;
  w.dtype = dtype;
  w.origin.kind = WeightsOrigin::Kind::checkpoint;
  w.origin.path = ck.origin();
  // Every name, shape and dtype is checked here, before any value is read.
  MatrixJobs matrices(dtype, options.storage);
  plan_load(ck, config, w, matrices);

  // The files' hashes and the matrices, on the host threads.
  std::vector<std::function<void()>> jobs;
  const auto& files = ck.files();
  w.origin.files.resize(options.digest ? files.size() : 0);
  for (std::size_t i = 0; i < w.origin.files.size(); ++i) {
    jobs.push_back([&w, &files, i] {
      const SafetensorsFile& f = *files[i];
      WeightsOrigin::File& out = w.origin.files[i];
      out.name = fs::path(f.path()).filename().string();
      out.bytes = f.size();
      const auto* base = static_cast<const unsigned char*>(f.bytes());
      std::size_t released = 0;
      out.sha256 = sha256_hex(f.bytes(), f.size(), [&](std::size_t done) {
        f.release(base + released, done - released);
        released = done;
      });
    });
  }
  for (auto& job : matrices.jobs()) jobs.push_back(std::move(job));
  std::mutex progress_mutex;
  int done = 0;
  WorkTeam team(options.threads);
  team.start(static_cast<int>(jobs.size()), [&](int item, int) {
    jobs[static_cast<std::size_t>(item)]();
    if (!options.progress) return;
    const std::lock_guard lock(progress_mutex);
    options.progress(++done, static_cast<int>(jobs.size()));
  });
  team.finish();

  if (options.digest) {
    std::sort(w.origin.files.begin(), w.origin.files.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    if (w.origin.files.size() == 1) {
      w.origin.content_hash = w.origin.files.front().sha256;
    } else {
      std::string manifest;
      for (const auto& f : w.origin.files) manifest += f.sha256 + "  " + f.name + "\n";
      w.origin.content_hash = sha256_hex(manifest.data(), manifest.size());
    }
  }

  store(w.final_norm, dtype);
  store(w.final_norm_bias, dtype);
  for (LayerWeights& L : w.layers) {
    for (std::vector<float>* v :
         {&L.attn_norm, &L.ffn_norm, &L.bq, &L.bk, &L.bv, &L.bo, &L.b_up, &L.b_down,
          &L.attn_norm_bias, &L.ffn_norm_bias, &L.q_norm, &L.k_norm}) {
      store(*v, dtype);
    }
  }
  if (config.tie_embeddings) w.lm_head = Matrix();  // embedding is the lm_head
  return w;
}

}  // namespace wafersim::models
