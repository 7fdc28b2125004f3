/* A stand-in libnccl.so.2 for the torch probe's tests: ncclGetVersion as nccl.h declares it,
 * `ncclResult_t ncclGetVersion(int *version)`, answering NCCL_CODE (nccl.h's NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z
 * from 2.9) given at compile time. */
int ncclGetVersion(int *version) {
    *version = NCCL_CODE;
    return 0; /* ncclSuccess */
}
