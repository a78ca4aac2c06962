// scikit-learn's datasets as the examples read them: the CSV files Debian's
// python3-sklearn ships, unpacked by tools/setup.sh into /opt/accy/datasets
// (or $ACCY_DATASETS), read directly; no Python at run time.
#ifndef ACCY_EXAMPLES_DATA_DATASETS_H_
#define ACCY_EXAMPLES_DATA_DATASETS_H_

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <zlib.h>

#include "absl/status/statusor.h"
#include "base/errors.h"
#include "base/strings.h"

namespace datasets {

// The folder holding the files.
inline std::string dir() {
  const char* env = std::getenv("ACCY_DATASETS");
  return env != nullptr && *env != '\0' ? env : "/opt/accy/datasets";
}

// A table of features and one integer label a row.
struct Table {
  int64_t rows = 0, features = 0;
  std::vector<double> x;   // [row, feature]
  std::vector<int> label;  // [row]
};

// The lines of `name` in dir(), read through zlib when it ends in ".gz".
inline absl::StatusOr<std::vector<std::string>> readLines(const std::string& name, std::string* path_out) {
  const std::string path = dir() + "/" + name;
  *path_out = path;
  auto missing = [&] {
    return accy::makeError(accy::ErrorKind::kInvalidArgument,
                           accy::strCat(path, " is missing: `bash tools/setup.sh` unpacks scikit-learn's datasets there "
                                              "(or set ACCY_DATASETS)"));
  };
  std::vector<std::string> lines;
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return missing();
    std::string text;
    char buf[1 << 16];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    const bool failed = n < 0;
    gzclose(f);
    if (failed) return accy::makeError(accy::ErrorKind::kInvalidArgument, accy::strCat(path, ": not a readable gzip file"));
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  std::ifstream in(path);
  if (!in) return missing();
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Row `r` of a table: `features` numbers and a label, comma-separated.
inline absl::Status parseRow(const std::string& path, int64_t line_number, const std::string& line, int64_t features,
                             Table& t) {
  std::istringstream fields(line);
  std::string field;
  for (int64_t f = 0; f <= features; ++f) {
    char* end = nullptr;
    if (!std::getline(fields, field, ',')) field.clear();
    const double v = std::strtod(field.c_str(), &end);
    if (field.empty() || end != field.c_str() + field.size() || !std::isfinite(v)) {
      return accy::makeError(accy::ErrorKind::kInvalidArgument,
                             accy::strCat(path, ":", line_number, ": field ", f + 1, " is not a number: \"", field, "\""));
    }
    if (f < features) {
      t.x.push_back(v);
    } else {
      t.label.push_back(static_cast<int>(v));
    }
  }
  return absl::OkStatus();
}

// One of scikit-learn's CSV files whose first line is "ROWS,FEATURES,..."
// (the names of the classes follow) and whose rows hold FEATURES numbers
// and a label: breast_cancer.csv, iris.csv, wine_data.csv. Errors name the
// file and the line.
inline absl::StatusOr<Table> readLabelledCsv(const std::string& name) {
  std::string path;
  absl::StatusOr<std::vector<std::string>> lines = readLines(name, &path);
  if (!lines.ok()) return lines.status();
  Table t;
  char comma = 0;
  if (lines->empty() || !(std::istringstream((*lines)[0]) >> t.rows >> comma >> t.features) || comma != ',' ||
      t.rows < 1 || t.features < 1) {
    return accy::makeError(accy::ErrorKind::kInvalidArgument,
                           accy::strCat(path, ": line 1 is not \"ROWS,FEATURES,...\": ",
                                        lines->empty() ? std::string() : (*lines)[0]));
  }
  if (static_cast<int64_t>(lines->size()) < t.rows + 1) {
    return accy::makeError(accy::ErrorKind::kInvalidArgument,
                           accy::strCat(path, ": ", lines->size() - 1, " rows, the first line says ", t.rows));
  }
  for (int64_t r = 0; r < t.rows; ++r) {
    if (absl::Status st = parseRow(path, r + 2, (*lines)[r + 1], t.features, t); !st.ok()) return st;
  }
  return t;
}

// The handwritten digits (digits.csv.gz): 1,797 rows of 64 pixels (8 x 8,
// row by row, values 0 to 16) and the digit; no header line.
inline absl::StatusOr<Table> readDigits() {
  std::string path;
  absl::StatusOr<std::vector<std::string>> lines = readLines("digits.csv.gz", &path);
  if (!lines.ok()) return lines.status();
  Table t;
  t.features = 64;
  for (const std::string& line : *lines) {
    if (line.empty()) continue;
    if (absl::Status st = parseRow(path, t.rows + 1, line, t.features, t); !st.ok()) return st;
    ++t.rows;
  }
  if (t.rows == 0) return accy::makeError(accy::ErrorKind::kInvalidArgument, accy::strCat(path, ": no rows"));
  return t;
}

// Each feature shifted to mean 0 and scaled to standard deviation 1 (the
// population's, as scikit-learn's StandardScaler); a constant feature is
// only shifted.
inline void standardise(Table& t) {
  for (int64_t f = 0; f < t.features; ++f) {
    double mean = 0, var = 0;
    for (int64_t r = 0; r < t.rows; ++r) mean += t.x[r * t.features + f];
    mean /= static_cast<double>(t.rows);
    for (int64_t r = 0; r < t.rows; ++r) var += std::pow(t.x[r * t.features + f] - mean, 2);
    const double sd = std::sqrt(var / static_cast<double>(t.rows));
    for (int64_t r = 0; r < t.rows; ++r) {
      double& v = t.x[r * t.features + f];
      v = (v - mean) / (sd > 0 ? sd : 1);
    }
  }
}

}  // namespace datasets

#endif  // ACCY_EXAMPLES_DATA_DATASETS_H_
