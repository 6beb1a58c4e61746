// Declarations of api.c for the Go files of package cudacodec. The tbcgo_
// prefix keeps these symbols apart from engine/cuda's in one binary.
#ifndef TALKBOX_CUDACODEC_API_H
#define TALKBOX_CUDACODEC_API_H
#include "talkbox_codec.h"
int tbcgo_open(const char *path, char *err, int cap);
int tbcgo_abi_version(void);
int tbcgo_device_count(void);
int tbcgo_device_name(int d, char *name, int cap, char *err, int ecap);
tbc_model *tbcgo_create(const tbc_weights *w, int d, char *err, int cap);
void tbcgo_destroy(tbc_model *m);
int tbcgo_samples_per_frame(const tbc_model *m);
tbc_stream *tbcgo_stream_create(tbc_model *m, char *err, int cap);
void tbcgo_stream_destroy(tbc_stream *s);
int tbcgo_push(tbc_stream *s, const int32_t *codes, int n, float *out, char *err, int cap);
int tbcgo_reset(tbc_stream *s, char *err, int cap);
int tbcgo_bench(tbc_stream *s, const int32_t *codes, int n, int iters, float *ms, char *err, int cap);
#endif
