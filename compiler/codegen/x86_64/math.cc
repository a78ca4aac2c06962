#include "compiler/codegen/x86_64/math.h"
