/* hk_probe_value's second definition (CommandHookTest). */
__attribute__((visibility("default"))) int hk_probe_value(void) { return 2; }
