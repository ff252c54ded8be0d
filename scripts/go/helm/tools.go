//go:build tools

// Package tools pins the command scripts/provision-helm.sh builds. Never compiled.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
