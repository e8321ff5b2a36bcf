/*
 * cipherbench's counting test provider: an OpenSSL 3 provider that serves
 * AES-128-GCM and AES-256-GCM, and nothing else, by handing every call to the
 * default provider's own implementation of each, and counts the calls.
 *
 * It exists so that the tests can exercise both answers of "which implementation
 * ran" for real (METHODOLOGY.md, "Provider and engine variants"): asked for
 * AES-GCM, a process under this provider runs it here (and the count rises); asked
 * for ChaCha20-Poly1305, the fetch falls back to the default provider.
 *
 * Counting: the tally of ../counter.h (contexts made, calls into the cipher, bytes
 * through update/cipher), mapped at the provider's start.
 * The provider's own parameter "cipherbench-calls" gives this process's count.
 *
 * Build: cc -shared -fPIC -O2 -o counting.so counting.c -lcrypto (the tests do; see
 * crates/cipherbench/tests/provider.rs). Load it with an OPENSSL_CONF such as
 * testdata/provider/counting.cnf.
 *
 * Delegation: the default provider's dispatch table of each algorithm is found with
 * OSSL_PROVIDER_query_operation on the first context (not at provider init, where
 * the library is still loading its configuration), and each of our functions calls
 * its counterpart with the default provider's provider context. The algorithm's
 * constant parameters are answered here, since they are asked for while the cipher
 * is being fetched.
 */
#include <pthread.h>
#include <string.h>

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "../counter.h"

#define CALLS_PARAM "cipherbench-calls"

static uint64_t local_counts[C_N];
static OSSL_LIB_CTX *libctx;    /* the library context that loaded us */

static void count(int which, uint64_t n)
{
    __atomic_fetch_add(&local_counts[which], n, __ATOMIC_RELAXED);
    count_shared(which, n);
}

/*
 * The default provider's implementation of each algorithm we serve, found on first
 * use. One slot per algorithm; the functions below are made per slot by SERVE().
 */
struct target {
    const char *name;    /* the first of the default provider's names */
    size_t keylen;
    pthread_once_t once;
    void *provctx;
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_dupctx_fn *dupctx;
    OSSL_FUNC_cipher_encrypt_init_fn *einit;
    OSSL_FUNC_cipher_decrypt_init_fn *dinit;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_cipher_fn *cipher;
    OSSL_FUNC_cipher_get_ctx_params_fn *get_ctx_params;
    OSSL_FUNC_cipher_set_ctx_params_fn *set_ctx_params;
    OSSL_FUNC_cipher_gettable_ctx_params_fn *gettable_ctx_params;
    OSSL_FUNC_cipher_settable_ctx_params_fn *settable_ctx_params;
};

static struct target targets[] = {
    { "AES-128-GCM", 16, PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL },
    { "AES-256-GCM", 32, PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL },
};

static int names_match(const char *names, const char *name)
{
    /* A colon-separated list such as "AES-128-GCM:id-aes128-GCM:2.16...". */
    size_t n = strlen(name);
    return strncmp(names, name, n) == 0 && (names[n] == ':' || names[n] == '\0');
}

static void resolve(struct target *t)
{
    OSSL_PROVIDER *deflt = OSSL_PROVIDER_load(libctx, "default");
    const OSSL_ALGORITHM *alg;
    const OSSL_DISPATCH *f;
    int no_cache = 0;

    if (deflt == NULL)
        return;
    alg = OSSL_PROVIDER_query_operation(deflt, OSSL_OP_CIPHER, &no_cache);
    for (; alg != NULL && alg->algorithm_names != NULL; alg++)
        if (names_match(alg->algorithm_names, t->name))
            break;
    if (alg == NULL || alg->algorithm_names == NULL)
        return;
    for (f = alg->implementation; f->function_id != 0; f++) {
        switch (f->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX: t->newctx = OSSL_FUNC_cipher_newctx(f); break;
        case OSSL_FUNC_CIPHER_FREECTX: t->freectx = OSSL_FUNC_cipher_freectx(f); break;
        case OSSL_FUNC_CIPHER_DUPCTX: t->dupctx = OSSL_FUNC_cipher_dupctx(f); break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT: t->einit = OSSL_FUNC_cipher_encrypt_init(f); break;
        case OSSL_FUNC_CIPHER_DECRYPT_INIT: t->dinit = OSSL_FUNC_cipher_decrypt_init(f); break;
        case OSSL_FUNC_CIPHER_UPDATE: t->update = OSSL_FUNC_cipher_update(f); break;
        case OSSL_FUNC_CIPHER_FINAL: t->final = OSSL_FUNC_cipher_final(f); break;
        case OSSL_FUNC_CIPHER_CIPHER: t->cipher = OSSL_FUNC_cipher_cipher(f); break;
        case OSSL_FUNC_CIPHER_GET_CTX_PARAMS:
            t->get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(f); break;
        case OSSL_FUNC_CIPHER_SET_CTX_PARAMS:
            t->set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(f); break;
        case OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS:
            t->gettable_ctx_params = OSSL_FUNC_cipher_gettable_ctx_params(f); break;
        case OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS:
            t->settable_ctx_params = OSSL_FUNC_cipher_settable_ctx_params(f); break;
        default: break;
        }
    }
    t->provctx = OSSL_PROVIDER_get0_provider_ctx(deflt);
    /* The reference is kept: the table must outlive every context. */
}

static void resolve0(void) { resolve(&targets[0]); }
static void resolve1(void) { resolve(&targets[1]); }
static void (*const resolvers[])(void) = { resolve0, resolve1 };

static struct target *ready(int i)
{
    struct target *t = &targets[i];

    pthread_once(&t->once, resolvers[i]);
    return t->newctx != NULL && t->freectx != NULL && t->update != NULL && t->final != NULL
        ? t : NULL;
}

static void *c_newctx(int i)
{
    struct target *t = ready(i);

    if (t == NULL)
        return NULL;
    count(C_CONTEXTS, 1);
    count(C_CALLS, 1);
    return t->newctx(t->provctx);
}

static void c_freectx(int i, void *vctx)
{
    struct target *t = ready(i);

    if (vctx != NULL && t != NULL)
        t->freectx(vctx);
}

static void *c_dupctx(int i, void *vctx)
{
    count(C_CALLS, 1);
    return targets[i].dupctx != NULL ? targets[i].dupctx(vctx) : NULL;
}

static int c_einit(int i, void *vctx, const unsigned char *key, size_t keylen,
                   const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    count(C_CALLS, 1);
    return targets[i].einit(vctx, key, keylen, iv, ivlen, params);
}

static int c_dinit(int i, void *vctx, const unsigned char *key, size_t keylen,
                   const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    count(C_CALLS, 1);
    return targets[i].dinit(vctx, key, keylen, iv, ivlen, params);
}

static int c_update(int i, void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                    const unsigned char *in, size_t inl)
{
    count(C_CALLS, 1);
    count(C_BYTES, inl);
    return targets[i].update(vctx, out, outl, outsize, in, inl);
}

static int c_final(int i, void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    count(C_CALLS, 1);
    return targets[i].final(vctx, out, outl, outsize);
}

static int c_cipher(int i, void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                    const unsigned char *in, size_t inl)
{
    count(C_CALLS, 1);
    count(C_BYTES, inl);
    return targets[i].cipher != NULL
        ? targets[i].cipher(vctx, out, outl, outsize, in, inl) : 0;
}

static int c_get_ctx_params(int i, void *vctx, OSSL_PARAM params[])
{
    return targets[i].get_ctx_params(vctx, params);
}

static int c_set_ctx_params(int i, void *vctx, const OSSL_PARAM params[])
{
    return targets[i].set_ctx_params(vctx, params);
}

static const OSSL_PARAM *c_gettable_ctx_params(int i, void *cctx)
{
    struct target *t = ready(i);

    return t != NULL && t->gettable_ctx_params != NULL
        ? t->gettable_ctx_params(cctx, t->provctx) : NULL;
}

static const OSSL_PARAM *c_settable_ctx_params(int i, void *cctx)
{
    struct target *t = ready(i);

    return t != NULL && t->settable_ctx_params != NULL
        ? t->settable_ctx_params(cctx, t->provctx) : NULL;
}

/* An AES-GCM's constants, as the default provider gives them. */
static int c_get_params(int i, OSSL_PARAM params[])
{
    OSSL_PARAM *p;

    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_MODE)) != NULL
        && !OSSL_PARAM_set_uint(p, 6 /* EVP_CIPH_GCM_MODE */))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_KEYLEN)) != NULL
        && !OSSL_PARAM_set_size_t(p, targets[i].keylen))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IVLEN)) != NULL
        && !OSSL_PARAM_set_size_t(p, 12))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_BLOCK_SIZE)) != NULL
        && !OSSL_PARAM_set_size_t(p, 1))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_AEAD)) != NULL
        && !OSSL_PARAM_set_int(p, 1))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_CUSTOM_IV)) != NULL
        && !OSSL_PARAM_set_int(p, 1))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_CTS)) != NULL
        && !OSSL_PARAM_set_int(p, 0))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK)) != NULL
        && !OSSL_PARAM_set_int(p, 0))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_HAS_RAND_KEY)) != NULL
        && !OSSL_PARAM_set_int(p, 0))
        return 0;
    return 1;
}

static const OSSL_PARAM gcm_gettable[] = {
    OSSL_PARAM_uint(OSSL_CIPHER_PARAM_MODE, NULL),
    OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, NULL),
    OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, NULL),
    OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_BLOCK_SIZE, NULL),
    OSSL_PARAM_int(OSSL_CIPHER_PARAM_AEAD, NULL),
    OSSL_PARAM_int(OSSL_CIPHER_PARAM_CUSTOM_IV, NULL),
    OSSL_PARAM_int(OSSL_CIPHER_PARAM_CTS, NULL),
    OSSL_PARAM_int(OSSL_CIPHER_PARAM_TLS1_MULTIBLOCK, NULL),
    OSSL_PARAM_int(OSSL_CIPHER_PARAM_HAS_RAND_KEY, NULL),
    OSSL_PARAM_END
};

static const OSSL_PARAM *gcm_gettable_params(void *provctx)
{
    (void)provctx;
    return gcm_gettable;
}

/* The dispatch functions of slot I, each handing over to the slot's c_* function. */
#define SERVE(I)                                                                      \
    static void *newctx##I(void *provctx) { (void)provctx; return c_newctx(I); }     \
    static void freectx##I(void *v) { c_freectx(I, v); }                              \
    static void *dupctx##I(void *v) { return c_dupctx(I, v); }                        \
    static int einit##I(void *v, const unsigned char *k, size_t kl,                   \
                        const unsigned char *iv, size_t ivl, const OSSL_PARAM p[])    \
    { return c_einit(I, v, k, kl, iv, ivl, p); }                                      \
    static int dinit##I(void *v, const unsigned char *k, size_t kl,                   \
                        const unsigned char *iv, size_t ivl, const OSSL_PARAM p[])    \
    { return c_dinit(I, v, k, kl, iv, ivl, p); }                                      \
    static int update##I(void *v, unsigned char *o, size_t *ol, size_t os,            \
                         const unsigned char *in, size_t inl)                         \
    { return c_update(I, v, o, ol, os, in, inl); }                                    \
    static int final##I(void *v, unsigned char *o, size_t *ol, size_t os)             \
    { return c_final(I, v, o, ol, os); }                                              \
    static int cipher##I(void *v, unsigned char *o, size_t *ol, size_t os,            \
                         const unsigned char *in, size_t inl)                         \
    { return c_cipher(I, v, o, ol, os, in, inl); }                                    \
    static int get_params##I(OSSL_PARAM p[]) { return c_get_params(I, p); }           \
    static int get_ctx_params##I(void *v, OSSL_PARAM p[])                             \
    { return c_get_ctx_params(I, v, p); }                                             \
    static int set_ctx_params##I(void *v, const OSSL_PARAM p[])                       \
    { return c_set_ctx_params(I, v, p); }                                             \
    static const OSSL_PARAM *gettable_ctx_params##I(void *c, void *provctx)           \
    { (void)provctx; return c_gettable_ctx_params(I, c); }                            \
    static const OSSL_PARAM *settable_ctx_params##I(void *c, void *provctx)           \
    { (void)provctx; return c_settable_ctx_params(I, c); }                            \
    static const OSSL_DISPATCH functions##I[] = {                                     \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))newctx##I },                       \
        { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))freectx##I },                     \
        { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))dupctx##I },                       \
        { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))einit##I },                  \
        { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))dinit##I },                  \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))update##I },                       \
        { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))final##I },                         \
        { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))cipher##I },                       \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))get_params##I },               \
        { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))get_ctx_params##I },       \
        { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))set_ctx_params##I },       \
        { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))gcm_gettable_params },    \
        { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS, (void (*)(void))gettable_ctx_params##I }, \
        { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS, (void (*)(void))settable_ctx_params##I }, \
        { 0, NULL }                                                                   \
    };

SERVE(0)
SERVE(1)

static const OSSL_ALGORITHM ciphers[] = {
    { "AES-128-GCM:id-aes128-GCM:2.16.840.1.101.3.4.1.6", "cipherbench.counting=yes",
      functions0, "AES-128-GCM served by the default provider, counted" },
    { "AES-256-GCM:id-aes256-GCM:2.16.840.1.101.3.4.1.46", "cipherbench.counting=yes",
      functions1, "AES-256-GCM served by the default provider, counted" },
    { NULL, NULL, NULL, NULL }
};

static const OSSL_ALGORITHM *query(void *provctx, int operation_id, int *no_cache)
{
    (void)provctx;
    *no_cache = 0;
    return operation_id == OSSL_OP_CIPHER ? ciphers : NULL;
}

static const OSSL_PARAM provider_gettable[] = {
    OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_NAME, NULL, 0),
    OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_VERSION, NULL, 0),
    OSSL_PARAM_int(OSSL_PROV_PARAM_STATUS, NULL),
    OSSL_PARAM_uint64(CALLS_PARAM, NULL),
    OSSL_PARAM_END
};

static const OSSL_PARAM *provider_gettable_params(void *provctx)
{
    (void)provctx;
    return provider_gettable;
}

static int provider_get_params(void *provctx, OSSL_PARAM params[])
{
    OSSL_PARAM *p;

    (void)provctx;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_NAME)) != NULL
        && !OSSL_PARAM_set_utf8_ptr(p, "cipherbench counting test provider"))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_VERSION)) != NULL
        && !OSSL_PARAM_set_utf8_ptr(p, "1"))
        return 0;
    if ((p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_STATUS)) != NULL
        && !OSSL_PARAM_set_int(p, 1))
        return 0;
    if ((p = OSSL_PARAM_locate(params, CALLS_PARAM)) != NULL
        && !OSSL_PARAM_set_uint64(p, __atomic_load_n(&local_counts[C_CALLS],
                                                      __ATOMIC_RELAXED)))
        return 0;
    return 1;
}

static void teardown(void *provctx)
{
    (void)provctx;
}

static const OSSL_DISPATCH provider_functions[] = {
    { OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))teardown },
    { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))query },
    { OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))provider_gettable_params },
    { OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))provider_get_params },
    { 0, NULL }
};

int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                       const OSSL_DISPATCH **out, void **provctx)
{
    OSSL_FUNC_core_get_libctx_fn *get_libctx = NULL;

    for (; in->function_id != 0; in++)
        if (in->function_id == OSSL_FUNC_CORE_GET_LIBCTX)
            get_libctx = OSSL_FUNC_core_get_libctx(in);
    /*
     * The core's library context is, in the process that loaded us through this
     * same libcrypto, the OSSL_LIB_CTX itself (as the legacy provider assumes).
     */
    libctx = get_libctx != NULL ? (OSSL_LIB_CTX *)get_libctx(handle) : NULL;
    map_counter();
    *out = provider_functions;
    *provctx = (void *)handle;
    return 1;
}
