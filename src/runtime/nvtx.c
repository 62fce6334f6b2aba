/* NVTX injection: with NVTX_INJECTION64_PATH pointing at libumpol.so, NVTX
 * calls this library's InitializeInjectionNvtx2 on the first NVTX call and
 * we install handlers for ranges and marks, which drive phases. The job needs
 * no change: torch.cuda.nvtx.range_push("forward") opens phase "forward".
 * Push/pop ranges and marks are used; start/end ranges, which may end on
 * another thread, are left alone. */

/* Types and callback ids only: the NVTX implementation belongs to the job. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include "umpol.h"

#define EXPORT __attribute__((visibility("default")))

/* Message text of an event, when it is ASCII (the only kind phases use). */
static const char *ascii_message(const nvtxEventAttributes_t *attr)
{
    if (attr && attr->messageType == NVTX_MESSAGE_TYPE_ASCII)
        return attr->message.ascii;
    return NULL;
}

static int on_range_push_a(const char *message)
{
    umpol_phase_enter(message);
    return 0;
}

static int on_range_push_ex(const nvtxEventAttributes_t *attr)
{
    const char *m = ascii_message(attr);
    umpol_phase_enter(m ? m : "(unnamed)");
    return 0;
}

static int on_range_pop(void)
{
    umpol_phase_exit();
    return 0;
}

static void on_mark_a(const char *message)
{
    umpol_mark(message);
}

static void on_mark_ex(const nvtxEventAttributes_t *attr)
{
    const char *m = ascii_message(attr);
    if (m)
        umpol_mark(m);
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks *callbacks =
        (const NvtxExportTableCallbacks *)get_export_table(NVTX_ETID_CALLBACKS);
    if (!callbacks || callbacks->struct_size < sizeof *callbacks)
        return 0;
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table)
        return 0;
    struct {
        unsigned id;
        NvtxFunctionPointer fn;
    } handlers[] = {
        {NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)on_range_push_a},
        {NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)on_range_push_ex},
        {NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)on_range_pop},
        {NVTX_CBID_CORE_MarkA, (NvtxFunctionPointer)on_mark_a},
        {NVTX_CBID_CORE_MarkEx, (NvtxFunctionPointer)on_mark_ex},
    };
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (handlers[i].id < size && table[handlers[i].id])
            *table[handlers[i].id] = handlers[i].fn;
    return 1;
}
