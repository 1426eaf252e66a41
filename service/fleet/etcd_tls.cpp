// etcd over TLS (etcd.h's use_etcd_tls, etcd_session): the CA etcd's certificate is checked
// against and this host's client certificate, for every session to etcd.
#include "etcd.h"

namespace cudanms::service {
namespace {

// use_etcd_tls()'s, for the process's life.
GTlsDatabase *etcd_trusted = nullptr;
GTlsCertificate *etcd_client_certificate = nullptr;

// etcd's request for this host's certificate, answered with use_etcd_tls()'s. GIO runs an
// interaction in the main context it was made in and waits for it there: a blocking call
// (post_sync) on a thread that is that context's would wait for itself, so it is made in a
// context of its own, run by a thread of its own.
struct ClientCertificate {
  GTlsInteraction parent;
};
struct ClientCertificateClass {
  GTlsInteractionClass parent_class;
};
G_DEFINE_TYPE(ClientCertificate, client_certificate, G_TYPE_TLS_INTERACTION)

GTlsInteractionResult give_certificate(GTlsInteraction *, GTlsConnection *connection,
                                       GTlsCertificateRequestFlags, GCancellable *, GError **) {
  if (!etcd_client_certificate) return G_TLS_INTERACTION_UNHANDLED;
  g_tls_connection_set_certificate(connection, etcd_client_certificate);
  return G_TLS_INTERACTION_HANDLED;
}

void client_certificate_class_init(ClientCertificateClass *klass) {
  G_TLS_INTERACTION_CLASS(klass)->request_certificate = give_certificate;
}
void client_certificate_init(ClientCertificate *) {}

GTlsInteraction *client_certificate_interaction() {
  static GTlsInteraction *interaction = [] {
    GMainContext *own = g_main_context_new();
    g_main_context_push_thread_default(own);
    auto *made =
        static_cast<GTlsInteraction *>(g_object_new(client_certificate_get_type(), nullptr));
    g_main_context_pop_thread_default(own);
    g_thread_unref(g_thread_new(
        "etcd-tls",
        [](gpointer context) -> gpointer {
          GMainLoop *loop = g_main_loop_new(static_cast<GMainContext *>(context), FALSE);
          g_main_loop_run(loop);  // for the process's life
          return nullptr;
        },
        own));
    return made;
  }();
  return interaction;
}

}  // namespace

// A session to etcd, checking its certificate against use_etcd_tls()'s CA and giving this
// host's where etcd asks for one.
SoupSession *etcd_session(SoupSession *session) {
  if (etcd_trusted) soup_session_set_tls_database(session, etcd_trusted);
  if (etcd_client_certificate)
    g_object_set(session, "tls-interaction", client_certificate_interaction(), nullptr);
  return session;
}

std::string use_etcd_tls(const EtcdTls &tls) {
  GError *error = nullptr;
  std::string why;
  g_clear_object(&etcd_trusted);
  g_clear_object(&etcd_client_certificate);
  if (!tls.ca.empty()) {
    GTlsDatabase *trusted = g_tls_file_database_new(tls.ca.c_str(), &error);
    if (!trusted) why = "cannot read the CA " + tls.ca + ": " + error->message;
    if (trusted) g_set_object(&etcd_trusted, trusted), g_object_unref(trusted);
  }
  g_clear_error(&error);
  if (why.empty() && !tls.certificate.empty()) {
    GTlsCertificate *certificate =
        g_tls_certificate_new_from_files(tls.certificate.c_str(), tls.key.c_str(), &error);
    if (!certificate)
      why = "cannot use the certificate " + tls.certificate + " with its key: " + error->message;
    if (certificate)
      g_set_object(&etcd_client_certificate, certificate), g_object_unref(certificate);
  }
  g_clear_error(&error);
  return why;
}

}  // namespace cudanms::service
