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

// One of scikit-learn's CSV files whose first line is "ROWS,FEATURES,..."
// (the names of the classes follow) and whose rows hold FEATURES numbers
// and a label: breast_cancer.csv, iris.csv, wine_data.csv. Errors name the
// file and the line.
inline absl::StatusOr<Table> readLabelledCsv(const std::string& name) {
  const std::string path = dir() + "/" + name;
  std::ifstream in(path);
  if (!in) {
    return accy::makeError(accy::ErrorKind::kInvalidArgument,
                           accy::strCat(path, " is missing: `bash tools/setup.sh` unpacks scikit-learn's datasets there "
                                              "(or set ACCY_DATASETS)"));
  }
  Table t;
  std::string line;
  char comma = 0;
  if (!std::getline(in, line) || !(std::istringstream(line) >> t.rows >> comma >> t.features) || comma != ',' ||
      t.rows < 1 || t.features < 1) {
    return accy::makeError(accy::ErrorKind::kInvalidArgument,
                           accy::strCat(path, ": line 1 is not \"ROWS,FEATURES,...\": ", line));
  }
  for (int64_t r = 0; r < t.rows; ++r) {
    if (!std::getline(in, line)) {
      return accy::makeError(accy::ErrorKind::kInvalidArgument,
                             accy::strCat(path, ": ", r, " rows, the first line says ", t.rows));
    }
    std::istringstream fields(line);
    std::string field;
    for (int64_t f = 0; f <= t.features; ++f) {
      char* end = nullptr;
      if (!std::getline(fields, field, ',')) field.clear();
      const double v = std::strtod(field.c_str(), &end);
      if (field.empty() || end != field.c_str() + field.size() || !std::isfinite(v)) {
        return accy::makeError(accy::ErrorKind::kInvalidArgument,
                               accy::strCat(path, ":", r + 2, ": field ", f + 1, " is not a number: \"", field, "\""));
      }
      if (f < t.features) {
        t.x.push_back(v);
      } else {
        t.label.push_back(static_cast<int>(v));
      }
    }
  }
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
