package prune

import (
	"sort"
	"strings"
)

// volumes builds the ownership index, the namespace mapping and the storage
// protections from the StorageClass, PVCs and PVs, raising a blocker for
// anything it cannot read or map.
func (b *invBuilder) volumes() {
	in, repo := b.in, &b.inv.Repo
	sc := in.StorageClass
	switch {
	case in.StorageClassErr != nil:
		b.block("storage class %s cannot be read: %v", repo.StorageClass, in.StorageClassErr)
		sc = nil
	case sc == nil:
		b.block("storage class %s cannot be read: not found", repo.StorageClass)
	default:
		scBucket := strings.TrimSpace(sc.Parameters["bucket"])
		if repo.Bucket == "" {
			repo.Bucket = scBucket
		} else if scBucket != repo.Bucket {
			b.block("backup repo bucket %q differs from storage class %s bucket %q", repo.Bucket, sc.Name, scBucket)
		}
	}
	if in.PVCsErr != nil {
		b.block("persistent volume claims cannot be listed: %v", in.PVCsErr)
	}
	if in.PVsErr != nil {
		b.block("persistent volumes cannot be listed: %v", in.PVsErr)
	}
	if in.PVCsErr != nil || in.PVsErr != nil {
		b.inv.OwnershipIncomplete = true
	}

	preCheck, _ := PreCheckPVCName(repo.Name, repo.UID)
	pvByName := map[string]PV{}
	for _, pv := range in.PVs {
		pvByName[pv.Name] = pv
	}
	pvcByKey := map[string]PVC{}
	for _, c := range in.PVCs {
		pvcByKey[c.Namespace+"/"+c.Name] = c
	}
	isRepoPV := func(pv PV) bool {
		return sc != nil && pv.StorageClassName == repo.StorageClass &&
			(pv.ClaimName == repo.BackupPVCName && repo.BackupPVCName != "" || pv.ClaimName == preCheck && preCheck != "") &&
			sc.Provisioner == CSIDriverS3 && pv.CSIDriver == sc.Provisioner
	}

	// Repository PVs: current iff Bound; every other phase (Released and
	// any other) is historical.
	repoPVs := map[string]bool{}
	for _, pv := range in.PVs {
		if !isRepoPV(pv) {
			continue
		}
		repoPVs[pv.Name] = true
		if root, ok := NormalizeVolumeHandle(pv.VolumeHandle, repo.Bucket); ok && IsCanonicalRoot(root) {
			b.addOwner(root, VolumeOwner{Kind: OwnerRepository, Namespace: pv.ClaimNamespace,
				Current: pv.Phase == "Bound", Resource: "PersistentVolume/" + pv.Name})
		}
	}

	b.backupPVCs(pvByName, sc)

	// User roots: every other PVC and PV owns its pvc-<uid> root and the
	// root its volume handle maps to.
	for _, c := range in.PVCs {
		if repoPVs[c.VolumeName] || b.claimedByRepoPV(c, repoPVs) {
			continue
		}
		if root := "pvc-" + c.UID; IsCanonicalRoot(root) {
			b.addOwner(root, VolumeOwner{Kind: OwnerUser, Namespace: c.Namespace, Current: true,
				Resource: "PersistentVolumeClaim/" + c.Namespace + "/" + c.Name})
		}
	}
	for _, pv := range in.PVs {
		if repoPVs[pv.Name] {
			continue
		}
		_, bound := pvcByKey[pv.ClaimNamespace+"/"+pv.ClaimName]
		o := VolumeOwner{Kind: OwnerUser, Namespace: pv.ClaimNamespace, Current: bound && pv.ClaimName != "",
			Resource: "PersistentVolume/" + pv.Name}
		if IsCanonicalRoot(pv.Name) {
			b.addOwner(pv.Name, o)
		}
		if root, ok := NormalizeVolumeHandle(pv.VolumeHandle, repo.Bucket); ok && IsCanonicalRoot(root) {
			b.addOwner(root, o)
		}
	}

	b.storageProtections(pvByName, sc, repoPVs)
}

// claimedByRepoPV reports whether a repository PV's claimRef names c.
func (b *invBuilder) claimedByRepoPV(c PVC, repoPVs map[string]bool) bool {
	for _, pv := range b.in.PVs {
		if repoPVs[pv.Name] && pv.ClaimNamespace == c.Namespace && pv.ClaimName == c.Name {
			return true
		}
	}
	return false
}

// backupPVCs builds the namespace mapping from the Backup PVCs.
func (b *invBuilder) backupPVCs(pvByName map[string]PV, sc *StorageClass) {
	repo := b.inv.Repo
	if repo.BackupPVCName == "" {
		return
	}
	found, foundSelected := false, false
	for _, c := range b.in.PVCs {
		if c.Name != repo.BackupPVCName {
			continue
		}
		found = true
		if b.in.Namespace != "" && c.Namespace != b.in.Namespace {
			continue
		}
		foundSelected = true
		if l, ok := c.Labels[LabelBackupRepoName]; ok && l != repo.Name {
			b.block("backup pvc %s/%s is labelled for backup repo %q", c.Namespace, c.Name, l)
			continue
		}
		prefix, ok := b.pvcPrefix(c, pvByName, sc, "backup pvc")
		if !ok {
			continue
		}
		if prefix == "" {
			b.block("backup pvc %s/%s maps to an empty object prefix", c.Namespace, c.Name)
			continue
		}
		if old, dup := b.inv.Mapping[c.Namespace]; dup && old != prefix {
			b.block("namespace %s has two backup pvc roots (%s, %s)", c.Namespace, old, prefix)
			continue
		}
		b.inv.Mapping[c.Namespace] = prefix
		if IsCanonicalRoot(prefix) {
			b.addOwner(prefix, VolumeOwner{Kind: OwnerRepository, Namespace: c.Namespace, Current: true,
				Resource: "PersistentVolumeClaim/" + c.Namespace + "/" + c.Name})
		}
	}
	if b.in.PVCsErr == nil {
		switch {
		case !found:
			b.block("backup pvc %s was not found in any namespace", repo.BackupPVCName)
		case !foundSelected:
			b.block("backup pvc %s was not found in namespace %s", repo.BackupPVCName, b.in.Namespace)
		}
	}
	nss := make([]string, 0, len(b.inv.Mapping))
	for ns := range b.inv.Mapping {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for i, a := range nss {
		for _, c := range nss[i+1:] {
			if Overlaps(b.inv.Mapping[a], b.inv.Mapping[c]) {
				b.block("object roots of namespaces %s and %s overlap", a, c)
			}
		}
	}
}

// pvcPrefix resolves a bound PVC on the repo StorageClass to its CSI volume
// handle prefix, raising a blocker when that is impossible.
func (b *invBuilder) pvcPrefix(c PVC, pvByName map[string]PV, sc *StorageClass, what string) (string, bool) {
	if c.VolumeName == "" {
		b.block("%s %s/%s is not bound (no spec.volumeName)", what, c.Namespace, c.Name)
		return "", false
	}
	pv, ok := pvByName[c.VolumeName]
	if !ok {
		b.block("%s %s/%s: persistent volume %s is missing or unreadable", what, c.Namespace, c.Name, c.VolumeName)
		return "", false
	}
	if sc == nil {
		return "", false
	}
	if pv.CSIDriver == "" || pv.CSIDriver != sc.Provisioner {
		b.block("%s %s/%s: persistent volume %s is not a CSI volume of driver %s", what, c.Namespace, c.Name, pv.Name, sc.Provisioner)
		return "", false
	}
	if pv.CSIDriver != CSIDriverS3 {
		b.block("%s %s/%s: csi driver %s is not supported (only %s)", what, c.Namespace, c.Name, pv.CSIDriver, CSIDriverS3)
		return "", false
	}
	prefix, ok := NormalizeVolumeHandle(pv.VolumeHandle, b.inv.Repo.Bucket)
	if !ok {
		b.block("%s %s/%s: volume handle %q cannot be mapped to bucket %q", what, c.Namespace, c.Name, pv.VolumeHandle, b.inv.Repo.Bucket)
		return "", false
	}
	return prefix, true
}

// storageProtections records every prefix in use by a PVC on the repo
// StorageClass other than the Backup PVC. repoPVs are the repository PVs
// (Backup or pre-check PVC): one no longer Bound is in use by nothing, so
// its root is a historical repository root (3.4.2), not protected storage.
func (b *invBuilder) storageProtections(pvByName map[string]PV, sc *StorageClass, repoPVs map[string]bool) {
	repo := b.inv.Repo
	for _, c := range b.in.PVCs {
		if c.StorageClassName != repo.StorageClass || c.Name == repo.BackupPVCName {
			continue
		}
		res := "PersistentVolumeClaim/" + c.Namespace + "/" + c.Name
		add := func(p string) {
			b.inv.StorageProtections = append(b.inv.StorageProtections, Protection{Prefix: p, Kind: "storage-class-pvc", Resource: res})
		}
		if c.UID != "" {
			add("pvc-" + c.UID)
		}
		if c.VolumeName != "" {
			if k, ok := NormalizeKey(c.VolumeName); ok && k != "" {
				add(k)
			}
		}
		if c.VolumeName == "" && c.Phase != "Bound" {
			continue // pending: nothing has been written for it yet
		}
		prefix, ok := b.pvcPrefix(c, pvByName, sc, "pvc")
		if !ok {
			continue
		}
		add(prefix)
		pv := pvByName[c.VolumeName]
		for _, raw := range csiPrefixes(pv) {
			if p, ok := NormalizeVolumeHandle(raw, repo.Bucket); ok {
				add(p)
			} else {
				b.block("pvc %s/%s: csi prefix %q cannot be mapped", c.Namespace, c.Name, raw)
			}
		}
	}
	// A PV on the class that is not the Backup PVC's (a user volume, maybe
	// Released with its claim gone) still holds data at its handle: protect
	// it whatever the handle's form, and block when it cannot be mapped. A
	// Released pre-check PV is the repository's own, and protects nothing.
	for _, pv := range b.in.PVs {
		if pv.StorageClassName != repo.StorageClass || (pv.ClaimName == repo.BackupPVCName && repo.BackupPVCName != "") ||
			(repoPVs[pv.Name] && pv.Phase != "Bound") {
			continue
		}
		res := "PersistentVolume/" + pv.Name
		raws := append([]string{pv.VolumeHandle}, csiPrefixes(pv)...)
		for i, raw := range raws {
			if i == 0 && raw == "" {
				b.block("pv %s on the repository's StorageClass has no volume handle, so the prefix it uses is unknown", pv.Name)
				continue
			}
			if p, ok := NormalizeVolumeHandle(raw, repo.Bucket); ok {
				b.inv.StorageProtections = append(b.inv.StorageProtections, Protection{Prefix: p, Kind: "storage-class-pv", Resource: res})
			} else {
				b.block("pv %s: prefix %q cannot be mapped into bucket %s", pv.Name, raw, repo.Bucket)
			}
		}
	}
	sort.SliceStable(b.inv.StorageProtections, func(i, j int) bool {
		return b.inv.StorageProtections[i].Prefix < b.inv.StorageProtections[j].Prefix
	})
	// A PVC and its PV often name the same prefix; one protection is enough.
	uniq := b.inv.StorageProtections[:0]
	for i, pr := range b.inv.StorageProtections {
		if i == 0 || pr.Prefix != uniq[len(uniq)-1].Prefix {
			uniq = append(uniq, pr)
		}
	}
	b.inv.StorageProtections = uniq
}

// csiPrefixes returns the prefixes a csi-s3 volume may use besides its
// handle: volumeAttributes entries and --prefix/--subdir/--path options.
func csiPrefixes(pv PV) []string {
	var out []string
	for _, k := range []string{"prefix", "path", "subPath", "subdir", "root"} {
		if v := strings.TrimSpace(pv.VolumeAttributes[k]); v != "" {
			out = append(out, v)
		}
	}
	opts := []string{pv.VolumeAttributes["options"], pv.VolumeAttributes["mountOptions"]}
	opts = append(opts, pv.MountOptions...)
	for _, o := range opts {
		toks := strings.FieldsFunc(o, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
		for i, t := range toks {
			for _, flag := range []string{"--prefix", "--subdir", "--path"} {
				switch {
				case strings.HasPrefix(t, flag+"="):
					out = append(out, t[len(flag)+1:])
				case t == flag && i+1 < len(toks):
					out = append(out, toks[i+1])
				}
			}
		}
	}
	return out
}
