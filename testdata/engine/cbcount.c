/*
 * cipherbench's counting test engine: a real OpenSSL ENGINE (id "cbcount") that
 * serves AES-128-GCM and AES-256-GCM, and nothing else, by handing every call to
 * the library's own legacy implementation of each, and counts the calls.
 *
 * It is the engine counterpart of testdata/provider/counting.c: it lets the tests
 * run `engine:cbcount` end to end and see both answers of "which implementation
 * ran" (METHODOLOGY.md, "Provider and engine variants"): asked for AES-GCM, a
 * process under the engine runs it here (libcrypto routes an init to the ENGINE
 * bound to the cipher's NID, even for a fetched cipher, and the count rises); asked
 * for ChaCha20-Poly1305, which it lacks, the default provider serves it.
 *
 * Counting: the counting provider's tally (../counter.h: contexts initialised with
 * a key, calls into the cipher, bytes through it), mapped when the engine starts.
 *
 * Delegation: each cipher is a copy of the library's EVP_aes_*_gcm() (same context
 * size, flags, ctrl and cleanup), with init and do_cipher replaced by ours, which
 * count and then call the originals.
 *
 * Build: cc -shared -fPIC -O2 -o cbcount.so cbcount.c -lcrypto (the tests do, see
 * crates/cipherbench/tests/provider.rs). Use it with OPENSSL_ENGINES set to the
 * directory holding cbcount.so: `openssl engine -t cbcount` says "available", and
 * `cipherbench speed --variants accel,engine:cbcount` makes it the default engine.
 * The ENGINE API is deprecated in OpenSSL 3; this file exists to test that path.
 */
#define OPENSSL_SUPPRESS_DEPRECATED

#include <string.h>

#include <openssl/engine.h>
#include <openssl/evp.h>
#include <openssl/objects.h>

#include "../counter.h"

static const char engine_id[] = "cbcount";
static const char engine_name[] = "cipherbench counting test engine (AES-GCM)";

typedef int (*init_fn)(EVP_CIPHER_CTX *, const unsigned char *, const unsigned char *, int);
typedef int (*cipher_fn)(EVP_CIPHER_CTX *, unsigned char *, const unsigned char *, size_t);

/* One slot per cipher served: the library's functions and our duplicate. */
struct slot {
    int nid;
    const EVP_CIPHER *(*library)(void);
    init_fn init;
    cipher_fn do_cipher;
    EVP_CIPHER *ours;
};

static struct slot slots[] = {
    { NID_aes_128_gcm, EVP_aes_128_gcm, NULL, NULL, NULL },
    { NID_aes_256_gcm, EVP_aes_256_gcm, NULL, NULL, NULL },
};
#define NSLOTS (sizeof(slots) / sizeof(slots[0]))

static struct slot *slot_of(int nid)
{
    size_t i;

    for (i = 0; i < NSLOTS; i++)
        if (slots[i].nid == nid)
            return &slots[i];
    return NULL;
}

static int counting_init(EVP_CIPHER_CTX *ctx, const unsigned char *key,
                         const unsigned char *iv, int enc)
{
    struct slot *s = slot_of(EVP_CIPHER_CTX_get_nid(ctx));

    if (s == NULL)
        return 0;
    if (key != NULL)
        count_shared(C_CONTEXTS, 1);
    return s->init(ctx, key, iv, enc);
}

static int counting_cipher(EVP_CIPHER_CTX *ctx, unsigned char *out,
                           const unsigned char *in, size_t len)
{
    struct slot *s = slot_of(EVP_CIPHER_CTX_get_nid(ctx));

    if (s == NULL)
        return -1;
    count_shared(C_CALLS, 1);
    /* A GCM custom cipher is called with in == NULL to finish; no bytes then. */
    if (in != NULL)
        count_shared(C_BYTES, len);
    return s->do_cipher(ctx, out, in, len);
}

static int nids[] = { NID_aes_128_gcm, NID_aes_256_gcm };

/* The ENGINE_CIPHERS_PTR: the list of NIDs, or the cipher for one. */
static int ciphers(ENGINE *e, const EVP_CIPHER **cipher, const int **list, int nid)
{
    struct slot *s;

    (void)e;
    if (cipher == NULL) {
        *list = nids;
        return (int)(sizeof(nids) / sizeof(nids[0]));
    }
    s = slot_of(nid);
    if (s == NULL || s->ours == NULL) {
        *cipher = NULL;
        return 0;
    }
    *cipher = s->ours;
    return 1;
}

static int make_ciphers(void)
{
    size_t i;

    for (i = 0; i < NSLOTS; i++) {
        struct slot *s = &slots[i];
        const EVP_CIPHER *lib = s->library();
        EVP_CIPHER *c;

        if (s->ours != NULL)
            continue;
        s->init = EVP_CIPHER_meth_get_init(lib);
        s->do_cipher = EVP_CIPHER_meth_get_do_cipher(lib);
        if (s->init == NULL || s->do_cipher == NULL)
            return 0;
        /*
         * A copy made field by field: OpenSSL 3's setters refuse to replace a
         * function already set, so EVP_CIPHER_meth_dup cannot be edited.
         */
        c = EVP_CIPHER_meth_new(s->nid, EVP_CIPHER_get_block_size(lib),
                                EVP_CIPHER_get_key_length(lib));
        if (c == NULL
            || !EVP_CIPHER_meth_set_iv_length(c, EVP_CIPHER_get_iv_length(lib))
            || !EVP_CIPHER_meth_set_flags(c, EVP_CIPHER_get_flags(lib))
            || !EVP_CIPHER_meth_set_impl_ctx_size(c, EVP_CIPHER_impl_ctx_size(lib))
            || !EVP_CIPHER_meth_set_init(c, counting_init)
            || !EVP_CIPHER_meth_set_do_cipher(c, counting_cipher)
            || !EVP_CIPHER_meth_set_cleanup(c, EVP_CIPHER_meth_get_cleanup(lib))
            || !EVP_CIPHER_meth_set_ctrl(c, EVP_CIPHER_meth_get_ctrl(lib))
            || !EVP_CIPHER_meth_set_set_asn1_params(c, EVP_CIPHER_meth_get_set_asn1_params(lib))
            || !EVP_CIPHER_meth_set_get_asn1_params(c, EVP_CIPHER_meth_get_get_asn1_params(lib))) {
            EVP_CIPHER_meth_free(c);
            return 0;
        }
        s->ours = c;
    }
    return 1;
}

static int engine_init(ENGINE *e)
{
    (void)e;
    map_counter();
    return 1;
}

static int engine_destroy(ENGINE *e)
{
    size_t i;

    (void)e;
    for (i = 0; i < NSLOTS; i++) {
        EVP_CIPHER_meth_free(slots[i].ours);
        slots[i].ours = NULL;
    }
    return 1;
}

static int bind(ENGINE *e, const char *id)
{
    if (id != NULL && strcmp(id, engine_id) != 0)
        return 0;
    return ENGINE_set_id(e, engine_id)
        && ENGINE_set_name(e, engine_name)
        && ENGINE_set_init_function(e, engine_init)
        && ENGINE_set_destroy_function(e, engine_destroy)
        && make_ciphers()
        && ENGINE_set_ciphers(e, ciphers);
}

IMPLEMENT_DYNAMIC_BIND_FN(bind)
IMPLEMENT_DYNAMIC_CHECK_FN()
