/* A stand-in for a profiler's library (CUPTI, rocprofiler): built under their file names
 * (libcupti.so.12, librocprofiler64.so) so a process that dlopens it maps what a profiled
 * process maps. It does nothing. */
int seqpoint_mimic_profiler_version(void) { return 1; }
