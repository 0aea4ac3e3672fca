package commands

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/ttmodel/tt-model/internal/atomicfile"
	"github.com/ttmodel/tt-model/internal/version"
	"github.com/ttmodel/tt-model/kube"
	"github.com/ttmodel/tt-model/runner"
)

func newK8sCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "k8s",
		Short: "Run a package on Kubernetes: render its manifests, apply, delete, status",
		Long: "k8s turns a staged package (build/<name>/) into a StatefulSet that runs `tt-model supervise` as PID 1\n" +
			"(exit 75 → chip reset → restart inside the pod), its Services, a ConfigMap with the package's\n" +
			"manifest and, under DRA, the chips' ResourceClaimTemplate, and applies them with server-side apply\n" +
			"through your kubeconfig. docs/kubernetes.md explains every field.",
		Example: "  tt-model k8s render build/rf-detr --registry registry.example/ml --chips device-plugin\n" +
			"  tt-model k8s apply build/pi05 --registry registry.example/ml && tt-model k8s status pi05-multi-robot",
	}
	cmd.AddCommand(newK8sRenderCmd(), newK8sApplyCmd(), newK8sDeleteCmd(), newK8sStatusCmd())
	return cmd
}

// renderFlags are the flags that shape the objects (render and apply).
type renderFlags struct {
	opts                   kube.Options
	replicas               int32
	cacheSize, cpu, memory string
}

func (f *renderFlags) bind(fs *pflag.FlagSet) {
	d := kube.Options{}.Defaults()
	fs.StringVar(&f.opts.Profile, "profile", "", "serve profile (default: the package's default profile)")
	fs.StringVar(&f.opts.Name, "name", "", "name of the objects (default <package>-<profile>)")
	fs.StringVarP(&f.opts.Namespace, "namespace", "n", "", "namespace (render: none in the objects; apply: the kubeconfig's)")
	fs.Int32Var(&f.replicas, "replicas", *d.Replicas, "replicas, each with its own chips and cache volume (0 keeps the objects and runs none)")
	fs.StringVar(&f.opts.Registry, "registry", "", "HOST/NAMESPACE the image was pushed to with tt-model push (default: the manifest's image.registry; one of the two, or --image-name, is required)")
	fs.StringVar(&f.opts.ImageName, "image-name", "", "the image's name on the nodes, when it was loaded there instead of pushed (the package's digest is appended)")
	fs.StringVar(&f.opts.Chips, "chips", "", "how the pods get their chips: dra (Tenstorrent's DRA driver, a ResourceClaimTemplate), device-plugin (extended resources) or none (render default dra; apply: dra where the API server serves resource.k8s.io/v1, else device-plugin)")
	fs.StringVar(&f.opts.ChipResource, "chip-resource", "", "with --chips device-plugin: the extended resource the chips are requested as (default: the device plugin's name for the hardware, e.g. tenstorrent.com/blackhole; \"none\" is --chips none)")
	fs.BoolVar(&f.opts.NoHugepages, "no-hugepages", false, "do not mount the host's /dev/hugepages-1G (mounted when the profile's server drives the chips itself)")
	fs.DurationVar(&f.opts.StartTimeout, "start-timeout", d.StartTimeout, "the supervisor's start timeout, and the startup probe's budget (a multiple of 10s)")
	fs.DurationVar(&f.opts.StopGrace, "stop-grace", d.StopGrace, "the supervisor's SIGTERM-to-SIGKILL grace; the pod's termination grace is this plus 15s")
	fs.StringVar(&f.opts.ResetCmd, "reset-cmd", "", "the supervisor's chip reset command (default: its own, tt-smi -r {chips})")
	fs.Int32Var(&f.opts.StatusPort, "status-port", d.StatusPort, "port of the supervisor's status endpoint (the liveness probe)")
	fs.StringVar(&f.opts.CacheHostPath, "cache-host-path", "", "keep the caches and hang markers in this host folder instead of a PVC per replica (make it group 1000, setgid and group-writable: chgrp 1000 DIR && chmod 2775 DIR)")
	fs.StringVar(&f.cacheSize, "cache-size", d.CacheSize.String(), "size of each replica's cache PVC (the weights, the kernel cache, the hang marker)")
	fs.StringVar(&f.opts.StorageClass, "storage-class", "", "storage class of the cache PVCs (default: the cluster's default)")
	fs.StringVar(&f.opts.HFTokenSecret, "hf-token-secret", "", "Secret whose key HF_TOKEN the weights job uses (gated or private weights)")
	fs.StringVar(&f.opts.HFEndpoint, "hf-endpoint", "", "the Hub the weights job pulls from, as HF_ENDPOINT (a mirror or private Hub; default the public Hub)")
	fs.StringVar(&f.opts.APIKeySecret, "api-key-secret", "", "Secret whose key api-key holds the API key the server then requires (mounted as a file, never in env or args)")
	fs.StringVar(&f.cpu, "cpu", "", "CPU request of the server, e.g. 4 (default: the threads the profile runs, docs/kubernetes.md)")
	fs.StringVar(&f.memory, "memory", "", "memory request and limit of the server, e.g. 16Gi (default: the model's measured peak plus headroom)")
}

// options parses the quantities into the render options.
func (f *renderFlags) options() (kube.Options, error) {
	o := f.opts
	o.Replicas = &f.replicas
	for _, q := range []struct {
		flag, value string
		to          *resource.Quantity
	}{{"--cache-size", f.cacheSize, &o.CacheSize}, {"--cpu", f.cpu, &o.CPU}, {"--memory", f.memory, &o.Memory}} {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil {
			return o, fmt.Errorf("%s %q: %w", q.flag, q.value, err)
		}
		*q.to = v
	}
	return o, nil
}

// render loads the package and renders it, printing the notes and the pods'
// Pod Security level on stderr.
func (f *renderFlags) render(cmd *cobra.Command, path string) (*kube.Manifests, error) {
	pkg, err := runner.LoadPackage(path)
	if err != nil {
		return nil, packageLoadError(cmd, path, err)
	}
	opts, err := f.options()
	if err != nil {
		return nil, &ExitError{Code: exitInvalid, Err: err}
	}
	m, err := kube.Render(pkg, opts)
	if err != nil {
		return nil, &ExitError{Code: exitInvalid, Err: err}
	}
	for _, n := range m.Notes {
		fmt.Fprintln(cmd.ErrOrStderr(), "note:", n)
	}
	if f.opts.Chips == "" && f.opts.ChipResource == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "chips: %s (render's default without a cluster to ask; --chips device-plugin or none chooses otherwise)\n", m.Chips)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "pod security:", m.PodSecurity)
	return m, nil
}

func newK8sRenderCmd() *cobra.Command {
	var f renderFlags
	var out string
	cmd := &cobra.Command{
		Use:   "render PACKAGE [--profile P] [--namespace NS] [--replicas N] [--out DIR | -]",
		Short: "Print the Kubernetes objects of a package profile as YAML",
		Long: "render writes the package's ConfigMap, the chips' ResourceClaimTemplate (--chips dra, the default\n" +
			"without a cluster to ask), Services and StatefulSet as one YAML stream on stdout, or one file per\n" +
			"object into --out DIR. PACKAGE is a staged package (build/<name>/ or its tt_kernel_manifest.json);\n" +
			"its image is referenced by digest, at --registry or --image-name. The pods' Pod Security level is\n" +
			"printed on stderr.",
		Example: "  tt-model k8s render build/rf-detr --registry registry.example/ml | kubectl apply --dry-run=server -f -\n" +
			"  tt-model k8s render build/pi05 --profile single-robot --registry registry.example/ml --chips device-plugin --out deploy/\n" +
			"  tt-model k8s render build/rf-detr --image-name tt-model/rf-detr --chips none",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := f.render(cmd, args[0])
			if err != nil {
				return err
			}
			if out == "-" {
				data, err := kube.YAML(m.Objects())
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(data)
				return err
			}
			files, err := writeManifestDir(out, m)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			for _, p := range files {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			return nil
		},
	}
	f.bind(cmd.Flags())
	cmd.Flags().StringVarP(&out, "out", "o", "-", "folder to write one YAML file per object into, or - for stdout")
	return cmd
}

// writeManifestDir writes <kind>-<name>.yaml per object into dir, each
// through atomicfile, so a failed render leaves the old files whole.
func writeManifestDir(dir string, m *kube.Manifests) ([]string, error) {
	var paths []string
	for _, obj := range m.Objects() {
		u, err := kube.Unstructured(obj)
		if err != nil {
			return nil, err
		}
		data, err := kube.ObjectYAML(obj)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, strings.ToLower(u.GetKind())+"-"+u.GetName()+".yaml")
		if err := atomicfile.Write(path, data); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// clusterFlags choose the cluster (apply, delete, status).
type clusterFlags struct {
	kubeconfig, context string
}

func (c *clusterFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&c.context, "context", "", "kubeconfig context (default its current context)")
}

func (c *clusterFlags) connect(cmd *cobra.Command) (*kube.Cluster, error) {
	cl, err := kube.Connect(cmd.Context(), kube.ConnectOptions{
		Kubeconfig: c.kubeconfig, Context: c.context,
		Warnings: cmd.ErrOrStderr(), UserAgent: "tt-model/" + version.Version,
	})
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	return cl, nil
}

func newK8sApplyCmd() *cobra.Command {
	var (
		f      renderFlags
		c      clusterFlags
		dryRun bool
		force  bool
	)
	cmd := &cobra.Command{
		Use:   "apply PACKAGE [render flags] [--dry-run] [--force-conflicts]",
		Short: "Render a package profile and apply it with server-side apply (field manager tt-model)",
		Long: "apply renders as `k8s render` does and sends each object to the API server of your kubeconfig with\n" +
			"server-side apply, field manager tt-model, into --namespace or the kubeconfig context's namespace.\n" +
			"Without --chips it asks the API server: DRA where it serves resource.k8s.io/v1, else the device plugin.\n" +
			"--dry-run has the API server validate, admit and default everything without storing it.",
		Example: "  tt-model k8s apply build/rf-detr --registry registry.example/ml --replicas 2\n" +
			"  tt-model k8s apply build/pi05 --profile disaggregated --registry registry.example/ml --dry-run",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			if f.opts.Chips == "" && f.opts.ChipResource == "" {
				if f.opts.Chips, err = cl.DefaultChips(cmd.Context()); err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "chips: %s (what the API server serves; --chips chooses)\n", f.opts.Chips)
			}
			m, err := f.render(cmd, args[0])
			if err != nil {
				return err
			}
			applied, err := cl.Apply(cmd.Context(), m, kube.ApplyOptions{DryRun: dryRun, Force: force})
			suffix := ""
			if dryRun {
				suffix = " (dry run: nothing stored)"
			}
			for _, u := range applied {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s/%s applied%s\n", u.GetKind(), u.GetNamespace(), u.GetName(), suffix)
			}
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if !dryRun {
				fmt.Fprintf(cmd.OutOrStdout(), "status: tt-model k8s status %s -n %s\n", m.Name, applied[0].GetNamespace())
			}
			return nil
		},
	}
	f.bind(cmd.Flags())
	c.bind(cmd.Flags())
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "server-side dry run (dryRun=All): validate and admit, store nothing")
	cmd.Flags().BoolVar(&force, "force-conflicts", false, "take over fields another field manager owns")
	return cmd
}

// instanceArg reads NAME|PACKAGE: a package path gives <package>-<profile>
// (or --name), anything else is the instance name itself.
func instanceArg(cmd *cobra.Command, arg, profile, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if _, err := os.Stat(arg); err != nil {
		return arg, nil
	}
	pkg, err := runner.LoadPackage(arg)
	if err != nil {
		return "", packageLoadError(cmd, arg, err)
	}
	prof, err := pkg.Wire.Container.ResolveProfile(profile)
	if err != nil {
		return "", &ExitError{Code: exitInvalid, Err: err}
	}
	return pkg.Wire.Name + "-" + prof.Name, nil
}

// instanceFlags name an instance and its cluster (delete, status).
type instanceFlags struct {
	profile, name, namespace string
	cluster                  clusterFlags
}

func (i *instanceFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&i.profile, "profile", "", "with a PACKAGE: its profile (default: the package's default)")
	fs.StringVar(&i.name, "name", "", "the objects' name, when rendered with --name")
	fs.StringVarP(&i.namespace, "namespace", "n", "", "namespace (default: the kubeconfig context's)")
	i.cluster.bind(fs)
}

// open resolves NAME|PACKAGE to the instance name and connects.
func (i *instanceFlags) open(cmd *cobra.Command, arg string) (string, *kube.Cluster, error) {
	name, err := instanceArg(cmd, arg, i.profile, i.name)
	if err != nil {
		return "", nil, err
	}
	cl, err := i.cluster.connect(cmd)
	return name, cl, err
}

func newK8sDeleteCmd() *cobra.Command {
	var (
		i    instanceFlags
		opts kube.DeleteOptions
	)
	cmd := &cobra.Command{
		Use:   "delete NAME|PACKAGE [--volumes] [--dry-run]",
		Short: "Delete the objects tt-model applied for an instance (its cache PVCs only with --volumes)",
		Long: "delete removes the StatefulSet, Services, ConfigMap and chip claim template labelled with the instance's name and\n" +
			"managed by tt-model. The replicas' cache PVCs (weights, kernel cache, hang markers) stay, so a\n" +
			"later apply finds the weights in place; --volumes deletes them too.",
		Example: "  tt-model k8s delete rf-detr-default\n  tt-model k8s delete build/pi05 --profile single-robot --volumes",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, cl, err := i.open(cmd, args[0])
			if err != nil {
				return err
			}
			deleted, err := cl.Delete(cmd.Context(), i.namespace, name, opts)
			for _, d := range deleted {
				fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", d)
			}
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			return nil
		},
	}
	i.bind(cmd.Flags())
	cmd.Flags().BoolVar(&opts.Volumes, "volumes", false, "also delete the replicas' cache PVCs")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "server-side dry run: delete nothing")
	return cmd
}

func newK8sStatusCmd() *cobra.Command {
	var (
		i      instanceFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "status NAME|PACKAGE [--json]",
		Short: "Show an instance's replicas and each one's supervisor state (starting, ready, resetting, …)",
		Long: "status reads the StatefulSet and its pods, and asks each running replica's supervisor for its\n" +
			"status JSON through the API server's pod proxy. When the supervisor cannot be reached (the pod is\n" +
			"pending or not running) the state comes from the pod's status instead, and says so.",
		Example: "  tt-model k8s status rf-detr-default\n  tt-model k8s status build/pi05 --profile single-robot --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, cl, err := i.open(cmd, args[0])
			if err != nil {
				return err
			}
			st, err := cl.Status(cmd.Context(), i.namespace, name)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			printK8sStatus(cmd.OutOrStdout(), st)
			return nil
		},
	}
	i.bind(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func printK8sStatus(w io.Writer, st *kube.Status) {
	fmt.Fprintf(w, "%s in namespace %s: %d/%d replicas ready\n  image    %s\n  services %s\n",
		st.Name, st.Namespace, st.Ready, st.Replicas, st.Image, strings.Join(st.Services, ", "))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tPOD\tPHASE\tREADY\tRESTARTS\tSTATE\tFROM\tDETAIL")
	for _, r := range st.Pods {
		from := "supervisor"
		if r.Supervisor == nil {
			from = "pod status"
		}
		if r.Pod == "" {
			from = "-"
		}
		detail := r.Detail
		if r.LastExit != "" {
			detail = strings.TrimSpace(detail + " (last exit: " + r.LastExit + ")")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%d\t%s\t%s\t%s\n", r.Ordinal, orNone(r.Pod), orNone(r.Phase), r.Ready, r.Restarts, r.State, from, orNone(detail))
	}
	tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
