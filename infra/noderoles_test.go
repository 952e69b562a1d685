package infra

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// rolesConfig is baseConfig, validated (NodeRoleName filled), for a
// stack in account 111122223333.
func rolesConfig(t *testing.T) Config {
	t.Helper()
	c := baseConfig(t)
	c.Account, c.Region = "111122223333", "eu-west-1"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNodeRolesOf(t *testing.T) {
	cfg := rolesConfig(t)
	cfg.InstanceProfileRoles = map[string]string{"LegacyNodeProfile": "LegacyNodeRole"}
	cfg.ExistingAccessEntries = []string{"arn:aws:iam::111122223333:role/LegacyNodeRole"}
	nc := &NodeConfig{NodePools: []string{"default"}, NodeClasses: []NodeClassInfo{
		{Name: "none"},
		{Name: "own-profile", InstanceProfile: "nodewright-example-nodewright-node-example"},
		{Name: "by-arn", Role: "arn:aws:iam::111122223333:role/teams/GpuNodeRole"},
		{Name: "by-name", Role: "GpuNodeRole", Windows: true},
		{Name: "stack-made-profile", InstanceProfile: "nodewright-example-GpuNodeRole"},
		{Name: "legacy", InstanceProfile: "LegacyNodeProfile"},
	}}
	roles, err := checkNodeConfig(cfg, nc)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range roles {
		got = append(got, r.Name+" "+r.ARN+" "+strings.Join(r.Classes, ",")+" "+r.AccessEntryType()+
			map[bool]string{true: " own"}[r.Own]+map[bool]string{true: " profile"}[r.Profile]+map[bool]string{true: " existing-entry"}[r.ExistingAccessEntry])
	}
	want := []string{
		"nodewright-node-example  none,own-profile EC2_LINUX own",
		"GpuNodeRole arn:aws:iam::111122223333:role/teams/GpuNodeRole by-arn,by-name,stack-made-profile EC2_WINDOWS profile",
		"LegacyNodeRole  legacy EC2_LINUX existing-entry",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("roles:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without the stack's role in use, it is not among the roles passed.
	nc.NodeClasses = nc.NodeClasses[2:]
	if roles, err = checkNodeConfig(cfg, nc); err != nil || roles[0].Own {
		t.Errorf("roles %+v, %v: the stack's own role is used by no class", roles[0], err)
	}
}

func TestNodeRolesOfRejects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		classes []NodeClassInfo
		want    []string
	}{
		{"instance profile whose role is not given", nil,
			[]NodeClassInfo{{Name: "a", InstanceProfile: "KarpenterNodeInstanceProfile", Source: "x.yaml:3: EC2NodeClass a"}},
			[]string{"x.yaml:3: EC2NodeClass a: spec.instanceProfile", "-c instanceProfileRoles=KarpenterNodeInstanceProfile=<role name or ARN>"}},
		{"role of another account", nil,
			[]NodeClassInfo{{Name: "a", Role: "arn:aws:iam::444455556666:role/Node"}},
			[]string{"spec.role: arn:aws:iam::444455556666:role/Node is in account 444455556666"}},
		{"not a role", nil,
			[]NodeClassInfo{{Name: "a", Role: "arn:aws:iam::111122223333:user/bob"}},
			[]string{"EC2NodeClass a: spec.role: \"arn:aws:iam::111122223333:user/bob\" is neither"}},
		{"existing access entry of a role no class uses", func(c *Config) { c.ExistingAccessEntries = []string{"Typo"} },
			[]NodeClassInfo{{Name: "a", Role: "Node"}},
			[]string{"existingAccessEntries: no EC2NodeClass uses role \"Typo\""}},
		{"profile mapping no class uses", func(c *Config) { c.InstanceProfileRoles = map[string]string{"Unused": "Node"} },
			[]NodeClassInfo{{Name: "a", Role: "Node"}},
			[]string{"instanceProfileRoles: no EC2NodeClass names instance profile \"Unused\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rolesConfig(t)
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			_, err := checkNodeConfig(cfg, &NodeConfig{NodePools: []string{"p"}, NodeClasses: tc.classes})
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestNodeRoleContext(t *testing.T) {
	for _, in := range []interface{}{
		"LegacyNodeProfile=LegacyNodeRole, Other=arn:aws:iam::111122223333:role/x/Other",
		`{"LegacyNodeProfile": "LegacyNodeRole", "Other": "arn:aws:iam::111122223333:role/x/Other"}`,
		map[string]interface{}{"LegacyNodeProfile": "LegacyNodeRole", "Other": "arn:aws:iam::111122223333:role/x/Other"},
		[]interface{}{"LegacyNodeProfile=LegacyNodeRole", "Other=arn:aws:iam::111122223333:role/x/Other"},
	} {
		ctx := map[string]interface{}{CtxInstanceProfileRoles: in, CtxExistingAccessEntries: "LegacyNodeRole,Other"}
		c, err := FromContext(func(k string) interface{} { return ctx[k] })
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		if len(c.InstanceProfileRoles) != 2 || c.InstanceProfileRoles["Other"] != "arn:aws:iam::111122223333:role/x/Other" || strings.Join(c.ExistingAccessEntries, " ") != "LegacyNodeRole Other" {
			t.Errorf("%v: %+v %v", in, c.InstanceProfileRoles, c.ExistingAccessEntries)
		}
	}
	ctx := map[string]interface{}{CtxInstanceProfileRoles: "NoRole", CtxExistingAccessEntries: "bad role name"}
	if _, err := FromContext(func(k string) interface{} { return ctx[k] }); err == nil || !strings.Contains(err.Error(), "want <key>=<value>") {
		t.Errorf("a profile without its role: %v", err)
	}
	c := rolesConfig(t)
	c.ExistingAccessEntries = []string{"bad role name"}
	c.InstanceProfileRoles = map[string]string{"bad profile": "arn:aws:iam::1:role/short-account"}
	err := c.Validate()
	for _, w := range []string{"existingAccessEntries: \"bad role name\" is neither", "\"bad profile\" is not an instance profile name", "\"arn:aws:iam::1:role/short-account\" is neither"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v, want %q", err, w)
		}
	}
}

// A configuration with an EC2NodeClass for each way of naming node IAM
// (the stack's role by name, an existing role by name, by ARN with a path,
// an existing instance profile, a Windows class, and one naming none),
// loaded with the project's loader and synthesized: an instance profile
// for each role given in spec.role, an access entry of the right type for
// each role not declared to have one, and iam:PassRole on exactly those
// roles.
func TestSeveralNodeRolesSynthesize(t *testing.T) {
	cfg := rolesConfig(t)
	cfg.ConfigDir = filepath.Join("testdata", "roles")
	cfg.AssetDir = filepath.Join(testRoot, "no-dist")
	cfg.InstanceProfileRoles = map[string]string{"LegacyNodeProfile": "LegacyNodeRole"}
	cfg.ExistingAccessEntries = []string{"LegacyNodeRole"}
	loader := func(files ...string) (*NodeConfig, error) {
		nc, err := LoadWithAPIs(files...)
		if err == nil {
			// The loader requires role or instanceProfile; the stack
			// accepts neither too (the stack's role).
			nc.NodeClasses = append(nc.NodeClasses, NodeClassInfo{Name: "none"})
		}
		return nc, err
	}
	s, err := newTestStack(t, cfg, loader, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	j := templateJSON(t, s)
	nodeRole := logicalID(t, j, "AWS::IAM::Role", "NodeRole")
	ownArn := js(map[string]interface{}{"Fn::GetAtt": []interface{}{nodeRole, "Arn"}})
	byName := func(role string) string {
		return js(map[string]interface{}{"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/" + role})
	}
	gpu := js("arn:aws:iam::111122223333:role/teams/GpuNodeRole")

	var profiles []string
	for _, p := range resources(j, "AWS::IAM::InstanceProfile") {
		profiles = append(profiles, js(p.Props["InstanceProfileName"])+" "+js(p.Props["Roles"]))
	}
	wantProfiles := []string{
		`"nodewright-example-GpuNodeRole" ["GpuNodeRole"]`,
		`"nodewright-example-KarpenterNodeRole-example" ["KarpenterNodeRole-example"]`,
		`"nodewright-example-WindowsNodeRole" ["WindowsNodeRole"]`,
		`"nodewright-example-nodewright-node-example" [{"Ref":"` + nodeRole + `"}]`,
	}
	sameSet(t, "instance profiles", profiles, wantProfiles)

	var entries []string
	for _, e := range resources(j, "AWS::EKS::AccessEntry") {
		if typ := e.Props["Type"]; typ != "STANDARD" {
			entries = append(entries, js(e.Props["PrincipalArn"])+" "+typ.(string))
		}
	}
	sameSet(t, "node access entries", entries, []string{
		ownArn + " EC2_LINUX", byName("KarpenterNodeRole-example") + " EC2_LINUX", gpu + " EC2_LINUX", byName("WindowsNodeRole") + " EC2_WINDOWS",
	})

	var passed []string
	for _, st := range statements(j) {
		if st.has("iam:PassRole") {
			if st.cond("StringEquals", "iam:PassedToService") != "ec2.amazonaws.com" {
				t.Errorf("%s: PassRole without iam:PassedToService=ec2.amazonaws.com", st.Policy)
			}
			for _, r := range st.Resources {
				passed = append(passed, js(r))
			}
		}
	}
	sameSet(t, "roles passed", passed, []string{
		ownArn, byName("KarpenterNodeRole-example"), gpu, byName("LegacyNodeRole"), byName("WindowsNodeRole"),
	})

	// AMI selection reads AWS's public parameters and exactly the
	// ssmParameter a class names, no other parameter.
	var params []string
	for _, st := range statements(j) {
		if st.has("ssm:GetParameter") {
			for _, r := range st.Resources {
				params = append(params, js(r))
			}
		}
	}
	sub := func(arn string) string { return js(map[string]interface{}{"Fn::Sub": arn}) }
	sameSet(t, "SSM parameters read", params, []string{
		sub("arn:${AWS::Partition}:ssm:*::parameter/aws/service/*"),
		sub("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/teams/gpu/ami-id"),
	})
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
