/* A simulated libnvidia-ml.so.1 for tests: the NVML C entry points gpudoctor's probe reaches through
 * nvidia-ml-py (pynvml → ctypes), answering from a node description.
 *
 * nvmlInit reads the file named by FAKE_NVML_SPEC: one fact per line, written by tests/nvmlsim/__init__.py from
 * a JSON description. Signatures and struct layouts follow nvml.h as nvidia-ml-py declares them. A fact the
 * description leaves out makes its query return NVML_ERROR_NOT_SUPPORTED. Symbols an old driver lacks are hidden
 * at link time (a version script), so pynvml sees exactly what it would see there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUCCESS 0
#define UNINITIALIZED 1
#define INVALID_ARGUMENT 2
#define NOT_SUPPORTED 3
#define NOT_FOUND 6
#define INSUFFICIENT_SIZE 7
#define ARGUMENT_VERSION_MISMATCH 25
#define MAX_GPUS 40
#define MAX_MIGS 8
#define MAX_PROCS 16
#define MAX_FAILING 16
#define HANG -1
#define MEMORY_V2 0x02000028u

typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_t;

typedef struct device {
    int is_mig, index, handle_error, query_error;
    /* per-query errors: `fails[i]` answers `fail_codes[i]` (a MIG parent's memory and process list answer
     * NO_PERMISSION to a process that was given a MIG device, not the GPU: nvml.h's note on MIG mode) */
    int nfailing, fail_codes[MAX_FAILING]; char fails[MAX_FAILING][32];
    char name[96], uuid[96], pci[32];
    int has_minor; unsigned int minor;
    int has_cc, cc_major, cc_minor;
    int has_memory; unsigned long long mem_total, mem_reserved, mem_used;
    int has_ecc, ecc_mode; unsigned long long ecc_volatile, ecc_aggregate;
    int has_retired, retired_pending;
    int has_remap; unsigned int remap[4];
    int has_mig_mode, mig_mode, mig_pending, max_migs;
    int has_fabric; unsigned char fabric_state; int fabric_status; /* nvmlGpuFabricInfo_t's state and status */
    int nvlinks; unsigned int nvlink_active; /* bit i: link i is up */
    int nprocs; proc_t procs[MAX_PROCS];
    /* MIG devices */
    struct device *parent, *migs[MAX_MIGS];
    unsigned int gi, ci, sm_count, gi_slices, ci_slices;
} device_t;

typedef struct { unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
                 sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
                 unsigned long long memorySizeMB; } attributes_t;
typedef struct { char busIdLegacy[16]; unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
                 char busId[32]; } pci_info_t;
typedef struct { unsigned long long total, free, used; } memory_v1_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } memory_v2_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; } process_v1_t;
/* nvml.h: nvmlGpuFabricState_t is an unsigned char; v2 adds a version word first and healthMask last, v3
 * healthSummary (an unsigned char) after it. */
typedef struct { unsigned char clusterUuid[16]; int status; unsigned int cliqueId; unsigned char state; }
    fabric_v1_t;
typedef struct { unsigned int version; unsigned char clusterUuid[16]; int status; unsigned int cliqueId;
                 unsigned char state; unsigned int healthMask; } fabric_v2_t;
typedef struct { unsigned int version; unsigned char clusterUuid[16]; int status; unsigned int cliqueId;
                 unsigned char state; unsigned int healthMask; unsigned char healthSummary; } fabric_v3_t;
#define FABRIC_V2 ((unsigned int)(sizeof(fabric_v2_t) | (2u << 24)))
#define FABRIC_V3 ((unsigned int)(sizeof(fabric_v3_t) | (3u << 24)))
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId,
                 computeInstanceId; } process_v2_t;
/* What drivers 535.43 to 535.86 wrote for _v3: one more field, 32-byte records (gpustat issue #161). */
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId,
                 computeInstanceId; unsigned long long usedGpuCcProtectedMemory; } process_v3_535_t;

static device_t gpus[MAX_GPUS], migs[MAX_GPUS * MAX_MIGS];
static int gpu_count, mig_count, initialized, init_error;
static char driver_version[80];
static int cuda_version;
static int record_bytes; /* the _v3 record size this driver writes; 0: by its version */
static int p2p[MAX_GPUS][MAX_GPUS]; /* nvmlGpuP2PStatus_t + 1; 0 = not described */

static void copy_text(char *to, size_t size, const char *from) {
    strncpy(to, from, size - 1);
    to[size - 1] = 0;
    to[strcspn(to, "\n")] = 0;
}

static device_t *gpu_at(int index) { return index >= 0 && index < MAX_GPUS ? &gpus[index] : NULL; }

/* One line of the description: `gpu INDEX KEY VALUES`, `mig GPU SLOT KEY VALUES`, `p2p A B STATUS` or a system
 * fact. Unknown lines are ignored. */
static void read_line(char *line) {
    char key[32] = "", rest[256] = "";
    int a, b, n = 0;
    device_t *d = NULL;
    if (sscanf(line, "gpu %d %31s %n", &a, key, &n) == 2 && (d = gpu_at(a))) {
        d->index = a;
    } else if (sscanf(line, "mig %d %d %31s %n", &a, &b, key, &n) == 3 && gpu_at(a) && b >= 0 && b < MAX_MIGS) {
        if (!gpus[a].migs[b]) {
            gpus[a].migs[b] = &migs[mig_count++];
            gpus[a].migs[b]->is_mig = 1;
            gpus[a].migs[b]->parent = &gpus[a];
        }
        d = gpus[a].migs[b];
        d->index = b;
    } else if (sscanf(line, "p2p %d %d %d", &a, &b, &n) == 3 && gpu_at(a) && gpu_at(b)) {
        p2p[a][b] = n + 1;
        return;
    } else {
        if (sscanf(line, "init_error %d", &init_error) == 1 || sscanf(line, "cuda_version %d", &cuda_version) == 1
            || sscanf(line, "gpu_count %d", &gpu_count) == 1 || sscanf(line, "process_record_bytes %d", &record_bytes) == 1)
            return;
        if (strncmp(line, "driver_version ", 15) == 0)
            copy_text(driver_version, sizeof driver_version, line + 15);
        return;
    }
    copy_text(rest, sizeof rest, line + n);
    if (!strcmp(key, "handle_error")) d->handle_error = atoi(rest);
    else if (!strcmp(key, "query_error")) d->query_error = atoi(rest);
    else if (!strcmp(key, "fails") && d->nfailing < MAX_FAILING) {
        if (sscanf(rest, "%31s %d", d->fails[d->nfailing], &d->fail_codes[d->nfailing]) == 2) d->nfailing++;
    }
    else if (!strcmp(key, "name")) copy_text(d->name, sizeof d->name, rest);
    else if (!strcmp(key, "uuid")) copy_text(d->uuid, sizeof d->uuid, rest);
    else if (!strcmp(key, "pci_bus_id")) copy_text(d->pci, sizeof d->pci, rest);
    else if (!strcmp(key, "minor")) d->has_minor = sscanf(rest, "%u", &d->minor) == 1;
    else if (!strcmp(key, "cc")) d->has_cc = sscanf(rest, "%d %d", &d->cc_major, &d->cc_minor) == 2;
    else if (!strcmp(key, "memory"))
        d->has_memory = sscanf(rest, "%llu %llu %llu", &d->mem_total, &d->mem_reserved, &d->mem_used) == 3;
    else if (!strcmp(key, "ecc"))
        d->has_ecc = sscanf(rest, "%d %llu %llu", &d->ecc_mode, &d->ecc_volatile, &d->ecc_aggregate) == 3;
    else if (!strcmp(key, "retired_pending")) d->has_retired = sscanf(rest, "%d", &d->retired_pending) == 1;
    else if (!strcmp(key, "remapped_rows"))
        d->has_remap = sscanf(rest, "%u %u %u %u", &d->remap[0], &d->remap[1], &d->remap[2], &d->remap[3]) == 4;
    else if (!strcmp(key, "mig_mode"))
        d->has_mig_mode = sscanf(rest, "%d %d %d", &d->mig_mode, &d->max_migs, &d->mig_pending) == 3;
    else if (!strcmp(key, "fabric")) {
        unsigned int state = 0;
        d->has_fabric = sscanf(rest, "%u %d", &state, &d->fabric_status) == 2;
        d->fabric_state = (unsigned char)state;
    }
    else if (!strcmp(key, "nvlink")) sscanf(rest, "%d %u", &d->nvlinks, &d->nvlink_active);
    else if (!strcmp(key, "process") && d->nprocs < MAX_PROCS) {
        proc_t *p = &d->procs[d->nprocs];
        if (sscanf(rest, "%u %llu %u %u", &p->pid, &p->used, &p->gi, &p->ci) == 4) d->nprocs++;
    } else if (!strcmp(key, "instance"))
        sscanf(rest, "%u %u %u %u %u", &d->gi, &d->ci, &d->sm_count, &d->gi_slices, &d->ci_slices);
}

int nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *path = getenv("FAKE_NVML_SPEC");
    FILE *spec = path ? fopen(path, "r") : NULL;
    char line[512];
    if (!spec) return 999; /* NVML_ERROR_UNKNOWN */
    memset(gpus, 0, sizeof gpus);
    memset(migs, 0, sizeof migs);
    memset(p2p, 0, sizeof p2p);
    gpu_count = mig_count = init_error = cuda_version = record_bytes = 0;
    driver_version[0] = 0;
    while (fgets(line, sizeof line, spec)) read_line(line);
    fclose(spec);
    if (init_error) return init_error;
    initialized = 1;
    return SUCCESS;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

int nvmlShutdown(void) {
    if (!initialized) return UNINITIALIZED;
    initialized = 0;
    return SUCCESS;
}

const char *nvmlErrorString(int result) {
    switch (result) {
    case SUCCESS: return "Success";
    case 999: return "Unknown Error";
    default: return "Simulated NVML error";
    }
}

#define REQUIRE_INIT if (!initialized) return UNINITIALIZED
/* A query on a device: the device must exist and answer (a GPU that fell off the bus answers GPU_IS_LOST). */
#define QUERY(d) REQUIRE_INIT; if (!(d)) return INVALID_ARGUMENT; if ((d)->query_error) return (d)->query_error
/* The same, for a query the description may make fail on its own (`fails NAME CODE`). */
#define QUERY_NAMED(d, name) QUERY(d); if (failing(d, name)) return failing(d, name)

static int failing(const struct device *d, const char *name) {
    for (int i = 0; i < d->nfailing; i++) {
        if (strcmp(d->fails[i], name)) continue;
        while (d->fail_codes[i] == HANG) pause(); /* a wedged driver: the query never returns */
        return d->fail_codes[i];
    }
    return 0;
}

static int put_text(char *to, unsigned int length, const char *text) {
    if (!text[0]) return NOT_SUPPORTED;
    if (strlen(text) + 1 > length) return INSUFFICIENT_SIZE;
    strcpy(to, text);
    return SUCCESS;
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    REQUIRE_INIT;
    return put_text(version, length, driver_version);
}

int nvmlSystemGetCudaDriverVersion(int *version) {
    REQUIRE_INIT;
    if (!cuda_version) return NOT_SUPPORTED;
    *version = cuda_version;
    return SUCCESS;
}

int nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

int nvmlDeviceGetCount_v2(unsigned int *count) {
    REQUIRE_INIT;
    *count = (unsigned int)gpu_count;
    return SUCCESS;
}

int nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device_t **device) {
    REQUIRE_INIT;
    if (index >= (unsigned int)gpu_count || index >= MAX_GPUS) return INVALID_ARGUMENT;
    if (gpus[index].handle_error) return gpus[index].handle_error;
    *device = &gpus[index];
    return SUCCESS;
}

int nvmlDeviceGetHandleByIndex(unsigned int index, device_t **device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

int nvmlDeviceGetName(device_t *d, char *name, unsigned int length) {
    QUERY_NAMED(d, "name");
    return put_text(name, length, d->name);
}

int nvmlDeviceGetUUID(device_t *d, char *uuid, unsigned int length) {
    QUERY_NAMED(d, "uuid");
    return put_text(uuid, length, d->uuid);
}

int nvmlDeviceGetPciInfo_v3(device_t *d, pci_info_t *pci) {
    QUERY_NAMED(d, "pci");
    if (d->is_mig || !d->pci[0]) return NOT_SUPPORTED;
    memset(pci, 0, sizeof *pci);
    copy_text(pci->busId, sizeof pci->busId, d->pci);
    sscanf(d->pci, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    return SUCCESS;
}

int nvmlDeviceGetMinorNumber(device_t *d, unsigned int *minor) {
    QUERY_NAMED(d, "minor");
    if (!d->has_minor) return NOT_SUPPORTED;
    *minor = d->minor;
    return SUCCESS;
}

int nvmlDeviceGetCudaComputeCapability(device_t *d, int *major, int *minor) {
    QUERY(d);
    device_t *g = d->is_mig ? d->parent : d;
    if (!g->has_cc) return NOT_SUPPORTED;
    *major = g->cc_major;
    *minor = g->cc_minor;
    return SUCCESS;
}

/* v1 counts the driver's reserved memory as used; v2 reports it apart (nvml.h, nvmlMemory_v2_t). */
int nvmlDeviceGetMemoryInfo(device_t *d, memory_v1_t *memory) {
    QUERY_NAMED(d, "memory");
    if (!d->has_memory) return NOT_SUPPORTED;
    memory->total = d->mem_total;
    memory->used = d->mem_used + d->mem_reserved;
    memory->free = d->mem_total - memory->used;
    return SUCCESS;
}

int nvmlDeviceGetMemoryInfo_v2(device_t *d, memory_v2_t *memory) {
    QUERY_NAMED(d, "memory");
    if (memory->version != MEMORY_V2) return ARGUMENT_VERSION_MISMATCH;
    if (!d->has_memory) return NOT_SUPPORTED;
    memory->total = d->mem_total;
    memory->reserved = d->mem_reserved;
    memory->used = d->mem_used;
    memory->free = d->mem_total - d->mem_reserved - d->mem_used;
    return SUCCESS;
}

int nvmlDeviceGetEccMode(device_t *d, int *current, int *pending) {
    QUERY_NAMED(d, "ecc");
    if (!d->has_ecc) return NOT_SUPPORTED;
    *current = *pending = d->ecc_mode;
    return SUCCESS;
}

/* errorType 1 = uncorrected; counterType 0 = volatile, 1 = aggregate. */
int nvmlDeviceGetTotalEccErrors(device_t *d, int error_type, int counter_type, unsigned long long *count) {
    QUERY(d);
    if (!d->has_ecc || !d->ecc_mode) return NOT_SUPPORTED;
    if (error_type != 1 || counter_type < 0 || counter_type > 1) return INVALID_ARGUMENT;
    *count = counter_type == 0 ? d->ecc_volatile : d->ecc_aggregate;
    return SUCCESS;
}

int nvmlDeviceGetRetiredPagesPendingStatus(device_t *d, int *pending) {
    QUERY(d);
    if (!d->has_retired) return NOT_SUPPORTED;
    *pending = d->retired_pending;
    return SUCCESS;
}

int nvmlDeviceGetRemappedRows(device_t *d, unsigned int *corrected, unsigned int *uncorrected,
                              unsigned int *pending, unsigned int *failure) {
    QUERY_NAMED(d, "remapped_rows");
    if (!d->has_remap) return NOT_SUPPORTED;
    *corrected = d->remap[0];
    *uncorrected = d->remap[1];
    *pending = d->remap[2];
    *failure = d->remap[3];
    return SUCCESS;
}

int nvmlDeviceGetMigMode(device_t *d, unsigned int *current, unsigned int *pending) {
    QUERY_NAMED(d, "mig_mode");
    if (d->is_mig || !d->has_mig_mode) return NOT_SUPPORTED;
    *current = (unsigned int)d->mig_mode;
    *pending = (unsigned int)d->mig_pending;
    return SUCCESS;
}

int nvmlDeviceGetNvLinkState(device_t *d, unsigned int link, unsigned int *active) {
    QUERY(d);
    if (!d->nvlinks) return NOT_SUPPORTED;
    if (link >= (unsigned int)d->nvlinks) return INVALID_ARGUMENT;
    *active = (d->nvlink_active >> link) & 1u;
    return SUCCESS;
}

int nvmlDeviceGetP2PStatus(device_t *a, device_t *b, unsigned int caps_index, int *status) {
    QUERY(a);
    if (!b) return INVALID_ARGUMENT;
    if (b->query_error) return b->query_error;
    if (caps_index > 5 || a->is_mig || b->is_mig) return INVALID_ARGUMENT;
    int described = p2p[a->index][b->index] ? p2p[a->index][b->index] : p2p[b->index][a->index];
    if (!described) return NOT_SUPPORTED;
    *status = described - 1;
    return SUCCESS;
}

/* The processes on a device: a MIG device's own, or every process of a GPU with the instance ids. */
static int processes(device_t *d, unsigned int *count, void *infos, size_t size) {
    QUERY(d);
    if (failing(d, "processes")) return failing(d, "processes"); /* NO_PERMISSION: a MIG parent's, as non-root */
    proc_t all[MAX_PROCS * (MAX_MIGS + 1)];
    unsigned int n = 0, i;
    int slot;
    for (i = 0; i < (unsigned int)d->nprocs; i++) all[n++] = d->procs[i];
    for (slot = 0; !d->is_mig && slot < MAX_MIGS; slot++)
        for (i = 0; d->migs[slot] && i < (unsigned int)d->migs[slot]->nprocs; i++) {
            all[n] = d->migs[slot]->procs[i];
            all[n].gi = d->migs[slot]->gi;
            all[n++].ci = d->migs[slot]->ci;
        }
    if (*count < n) {
        *count = n;
        return INSUFFICIENT_SIZE;
    }
    *count = n;
    for (i = 0; i < n; i++) {
        process_v2_t *p = (process_v2_t *)((char *)infos + i * size);
        p->pid = all[i].pid;
        p->usedGpuMemory = all[i].used;
        if (size >= sizeof(process_v2_t)) {
            p->gpuInstanceId = d->is_mig ? d->gi : all[i].gi;
            p->computeInstanceId = d->is_mig ? d->ci : all[i].ci;
        }
    }
    return SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses(device_t *d, unsigned int *count, process_v1_t *infos) {
    return processes(d, count, infos, sizeof(process_v1_t));
}

int nvmlDeviceGetComputeRunningProcesses_v2(device_t *d, unsigned int *count, process_v2_t *infos) {
    return processes(d, count, infos, sizeof(process_v2_t));
}

/* The v3 record size by driver: 32 bytes on 535.43 to before 535.86, 24 elsewhere. */
static size_t v3_record_size(void) {
    int major = 0, minor = 0;
    if (record_bytes) return record_bytes == 32 ? sizeof(process_v3_535_t) : sizeof(process_v2_t);
    sscanf(driver_version, "%d.%d", &major, &minor);
    return major == 535 && minor >= 43 && minor < 86 ? sizeof(process_v3_535_t) : sizeof(process_v2_t);
}

int nvmlDeviceGetComputeRunningProcesses_v3(device_t *d, unsigned int *count, void *infos) {
    size_t size = v3_record_size();
    int status = processes(d, count, infos, size);
    if (status == SUCCESS && size == sizeof(process_v3_535_t))
        for (unsigned int i = 0; i < *count; i++)
            ((process_v3_535_t *)infos)[i].usedGpuCcProtectedMemory = 0;
    return status;
}

int nvmlDeviceGetMaxMigDeviceCount(device_t *d, unsigned int *count) {
    QUERY(d);
    if (d->is_mig || !d->has_mig_mode || !d->max_migs) return NOT_SUPPORTED;
    *count = (unsigned int)d->max_migs;
    return SUCCESS;
}

int nvmlDeviceGetMigDeviceHandleByIndex(device_t *d, unsigned int index, device_t **mig) {
    QUERY(d);
    if (d->is_mig || !d->mig_mode) return NOT_SUPPORTED;
    if (index >= (unsigned int)d->max_migs || index >= MAX_MIGS) return INVALID_ARGUMENT;
    if (!d->migs[index]) return NOT_FOUND;
    if (d->migs[index]->handle_error) return d->migs[index]->handle_error;
    *mig = d->migs[index];
    return SUCCESS;
}

int nvmlDeviceIsMigDeviceHandle(device_t *d, unsigned int *is_mig) {
    QUERY(d);
    *is_mig = (unsigned int)d->is_mig;
    return SUCCESS;
}

int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(device_t *d, device_t **parent) {
    QUERY(d);
    if (!d->is_mig) return INVALID_ARGUMENT;
    *parent = d->parent;
    return SUCCESS;
}

int nvmlDeviceGetGpuInstanceId(device_t *d, unsigned int *id) {
    QUERY(d);
    if (!d->is_mig) return NOT_SUPPORTED;
    *id = d->gi;
    return SUCCESS;
}

int nvmlDeviceGetComputeInstanceId(device_t *d, unsigned int *id) {
    QUERY(d);
    if (!d->is_mig) return NOT_SUPPORTED;
    *id = d->ci;
    return SUCCESS;
}

int nvmlDeviceGetAttributes_v2(device_t *d, attributes_t *attributes) {
    QUERY(d);
    if (!d->is_mig) return NOT_SUPPORTED; /* nvml.h: "currently only supports MIG device handles" */
    memset(attributes, 0, sizeof *attributes);
    attributes->multiprocessorCount = d->sm_count;
    attributes->gpuInstanceSliceCount = d->gi_slices;
    attributes->computeInstanceSliceCount = d->ci_slices;
    attributes->memorySizeMB = d->mem_total >> 20;
    return SUCCESS;
}

/* The GPU's state in the NVLink fabric (Hopper and newer; NOT_SUPPORTED where the description has none). */
static int fabric(device_t *d, unsigned char *uuid, int *status, unsigned int *clique, unsigned char *state) {
    QUERY_NAMED(d, "fabric");
    if (d->is_mig || !d->has_fabric) return NOT_SUPPORTED;
    memset(uuid, 0, 16);
    *status = d->fabric_status;
    *clique = 0;
    *state = d->fabric_state;
    return SUCCESS;
}

int nvmlDeviceGetGpuFabricInfo(device_t *d, fabric_v1_t *info) {
    return fabric(d, info->clusterUuid, &info->status, &info->cliqueId, &info->state);
}

int nvmlDeviceGetGpuFabricInfoV(device_t *d, fabric_v3_t *info) {
    if (info->version != FABRIC_V2 && info->version != FABRIC_V3) return ARGUMENT_VERSION_MISMATCH;
    int status = fabric(d, info->clusterUuid, &info->status, &info->cliqueId, &info->state);
    if (status == SUCCESS) info->healthMask = 0;
    if (status == SUCCESS && info->version == FABRIC_V3) info->healthSummary = 0;
    return status;
}

/* sizeof of each struct this file shares with pynvml, for the layout test (tests/test_nvml.py). */
unsigned long fake_nvml_struct_size(const char *name) {
    if (!strcmp(name, "nvmlPciInfo_t")) return sizeof(pci_info_t);
    if (!strcmp(name, "c_nvmlMemory_t")) return sizeof(memory_v1_t);
    if (!strcmp(name, "c_nvmlMemory_v2_t")) return sizeof(memory_v2_t);
    if (!strcmp(name, "c_nvmlProcessInfo_v2_t")) return sizeof(process_v2_t);
    if (!strcmp(name, "c_nvmlDeviceAttributes")) return sizeof(attributes_t);
    if (!strcmp(name, "c_nvmlGpuFabricInfo_t")) return sizeof(fabric_v1_t);
    if (!strcmp(name, "c_nvmlGpuFabricInfo_v2_t")) return sizeof(fabric_v2_t);
    return 0;
}
