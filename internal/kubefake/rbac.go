package kubefake

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// RBAC decides requests from Roles, ClusterRoles and their bindings, as
// the API server's RBAC authorizer does: a request is allowed when a
// binding names its user (a ServiceAccount, a User, or a Group the user is
// in) and the role it binds has a rule for the request's API group (the
// core group, ""), resource, verb and, where the rule names any, resource
// name. A RoleBinding grants within its own namespace only.
type RBAC struct {
	Roles               []rbacv1.Role
	ClusterRoles        []rbacv1.ClusterRole
	RoleBindings        []rbacv1.RoleBinding
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
}

// Authorize is the decision, for Server.Authorize.
func (r RBAC) Authorize(a Attributes) error {
	for _, b := range r.ClusterRoleBindings {
		if bindsUser(b.Subjects, "", a.User) && r.allows(b.RoleRef, "", a) {
			return nil
		}
	}
	for _, b := range r.RoleBindings {
		if a.Namespace != b.Namespace || !bindsUser(b.Subjects, b.Namespace, a.User) {
			continue
		}
		if r.allows(b.RoleRef, b.Namespace, a) {
			return nil
		}
	}
	return fmt.Errorf("%w (%s)", ErrDenied, a)
}

func (r RBAC) allows(ref rbacv1.RoleRef, ns string, a Attributes) bool {
	var rules []rbacv1.PolicyRule
	switch ref.Kind {
	case "Role":
		for _, role := range r.Roles {
			if role.Name == ref.Name && role.Namespace == ns {
				rules = role.Rules
			}
		}
	case "ClusterRole":
		for _, role := range r.ClusterRoles {
			if role.Name == ref.Name {
				rules = role.Rules
			}
		}
	}
	for _, rule := range rules {
		if has(rule.APIGroups, "") && has(rule.Resources, a.Resource) && has(rule.Verbs, a.Verb) &&
			(len(rule.ResourceNames) == 0 || a.Name != "" && slices.Contains(rule.ResourceNames, a.Name)) {
			return true
		}
	}
	return false
}

func has(l []string, s string) bool { return slices.Contains(l, s) || slices.Contains(l, "*") }

// bindsUser: whether subjects name user (ns is a RoleBinding's namespace,
// the default of its ServiceAccount subjects).
func bindsUser(subjects []rbacv1.Subject, ns, user string) bool {
	saNS, _, isSA := strings.Cut(strings.TrimPrefix(user, "system:serviceaccount:"), ":")
	isSA = isSA && strings.HasPrefix(user, "system:serviceaccount:")
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sns := s.Namespace
			if sns == "" {
				sns = ns
			}
			if user == ServiceAccountUser(sns, s.Name) {
				return true
			}
		case rbacv1.UserKind:
			if s.Name == user {
				return true
			}
		case rbacv1.GroupKind:
			if s.Name == "system:authenticated" || isSA && (s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+saNS) {
				return true
			}
		}
	}
	return false
}
