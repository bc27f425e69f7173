#include "ek_status.h"

const char *ek_status_describe(ek_status status) {
    switch (status) {
    case EK_OK: return "ok";
    case EK_ERR_NULL_POINTER: return "a required pointer is NULL";
    case EK_ERR_SHAPE: return "invalid dimension";
    case EK_ERR_RANGE: return "row range out of bounds";
    case EK_ERR_UNKNOWN_ISA: return "unknown ISA name";
    case EK_ERR_ISA_UNSUPPORTED: return "ISA not supported by this CPU or build";
    case EK_ERR_FORMAT: return "unknown weight format";
    case EK_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case EK_ERR_OUT_OF_MEMORY: return "out of memory";
    }
    return "unknown status";
}
