/*
 * ek_status.h — the status every CKernels entry point returns.
 *
 * A kernel never aborts on bad input: it returns one of these, and the Swift
 * wrapper turns it into a typed error that names the offending argument.
 */
#ifndef EK_STATUS_H
#define EK_STATUS_H

typedef enum ek_status {
    EK_OK = 0,
    EK_ERR_NULL_POINTER = 1,     /* a required pointer argument is NULL          */
    EK_ERR_SHAPE = 2,            /* a dimension is invalid (e.g. K % 32 != 0)    */
    EK_ERR_RANGE = 3,            /* a row range lies outside the matrix          */
    EK_ERR_UNKNOWN_ISA = 4,      /* an ISA name that Ember does not know         */
    EK_ERR_ISA_UNSUPPORTED = 5,  /* a known ISA this CPU (or build) cannot run   */
    EK_ERR_FORMAT = 6,           /* an unknown weight format                     */
    EK_ERR_BUFFER_TOO_SMALL = 7, /* an output or work buffer is smaller than needed */
    EK_ERR_OUT_OF_MEMORY = 8,    /* a work buffer could not be allocated         */
} ek_status;

/* A short, static, human-readable description of a status. */
const char *ek_status_describe(ek_status status);

#endif /* EK_STATUS_H */
