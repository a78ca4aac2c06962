// Accy's version: the one place it is written is the file VERSION at the
// root of the source tree (vYY.MM.N); `accy --version`, `accyd --version`
// and accyd's ServerInfo report it, and `make release VERSION=...` checks
// it against the release asked for.
#ifndef ACCY_ACCY_VERSION_H_
#define ACCY_ACCY_VERSION_H_

namespace accy {

// "v26.12.0"
inline constexpr char kVersion[] =
#include "accy/version.inc"
    ;

}  // namespace accy

#endif  // ACCY_ACCY_VERSION_H_
