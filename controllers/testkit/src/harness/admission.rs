//! An admission policy that refuses some requests in one test namespace: a
//! ValidatingAdmissionPolicy and its binding. Both are cluster-scoped, so a test removes them
//! when it ends ([`DenyPolicy::remove`]), whatever happened.

use anyhow::{Context as _, Result};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use super::env::Env;
use crate::unique_name;

/// A policy denying, in the namespace of one [`Env`], the requests of `rule` for which
/// `expression` (CEL over `object`) is false, with `message`.
pub struct DenyPolicy {
    name: String,
    policies: Api<ValidatingAdmissionPolicy>,
    bindings: Api<ValidatingAdmissionPolicyBinding>,
}

impl DenyPolicy {
    /// Creates the policy and its binding (named `<prefix>-<random>`). The API server applies
    /// them a moment later: probe with a request the policy refuses before relying on it.
    /// `rule` is one entry of `resourceRules`, e.g.
    /// `{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}`.
    pub async fn install(
        env: &Env,
        prefix: &str,
        rule: Value,
        expression: &str,
        message: &str,
    ) -> Result<Self> {
        let client = env.cluster.client();
        let name = unique_name(prefix);
        let selector = json!({"matchLabels": {"kubernetes.io/metadata.name": env.name()}});
        let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"namespaceSelector": selector, "resourceRules": [rule]},
                "validations": [{"expression": expression, "message": message}],
            },
        }))?;
        let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": selector},
            },
        }))?;
        let this = Self {
            policies: Api::all(client.clone()),
            bindings: Api::all(client),
            name,
        };
        this.policies
            .create(&PostParams::default(), &policy)
            .await
            .with_context(|| format!("creating ValidatingAdmissionPolicy {}", this.name))?;
        this.bindings
            .create(&PostParams::default(), &binding)
            .await
            .with_context(|| format!("creating ValidatingAdmissionPolicyBinding {}", this.name))?;
        Ok(this)
    }

    /// Deletes the binding: the policy stops refusing (a moment later).
    pub async fn unbind(&self) -> Result<()> {
        match self
            .bindings
            .delete(&self.name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting binding {}", self.name)),
        }
    }

    /// Deletes the binding and the policy.
    pub async fn remove(self) -> Result<()> {
        self.unbind().await?;
        match self
            .policies
            .delete(&self.name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("deleting policy {}", self.name)),
        }
    }
}
